package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// memoryLimit is the manager's container memory limit
// (config/manager/manager.yaml), passed as the Deployment passes it:
// `modelgate serve` sets GOMEMLIMIT to 90% of it.
const memoryLimit = "268435456" // 256Mi

// stopTimeout bounds how long a replica may take to exit after SIGTERM:
// the Deployment's terminationGracePeriodSeconds.
const stopTimeout = 50 * time.Second

// replica is one `modelgate serve` process with its own webhook, metrics
// and health ports, sharing the control plane's serving certificate.
type replica struct {
	name                           string
	binary, configPath, kubeconfig string
	webhookAddr, healthAddr        string
	metricsAddr                    string
	logPath                        string

	// cfg is the Configuration written at configPath.
	cfg *config.Configuration

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// newReplica writes the replica's Configuration: the control plane's
// certificate and namespace, its own ports, metrics served securely (the
// default: HTTPS, the caller's token checked by the API server).
func newReplica(name, binary, dir string, cp *controlPlane) (*replica, error) {
	r := &replica{name: name, binary: binary, kubeconfig: cp.modelgateKubeconfig,
		configPath: filepath.Join(dir, name+".yaml"), logPath: filepath.Join(dir, name+".log")}
	var err error
	for _, a := range []*string{&r.webhookAddr, &r.healthAddr, &r.metricsAddr} {
		if *a, err = cluster.FreeAddr(); err != nil {
			return nil, err
		}
	}
	c := config.New()
	c.Webhook.Host = "127.0.0.1"
	port, _ := strconv.Atoi(r.webhookAddr[strings.LastIndex(r.webhookAddr, ":")+1:])
	c.Webhook.Port = int32(port) //nolint:gosec // a local port number.
	c.Webhook.CertDir = cp.certDir
	c.Metrics.BindAddress = r.metricsAddr
	c.Health.BindAddress = r.healthAddr
	r.cfg = c
	if err := r.writeConfig(); err != nil {
		return nil, err
	}
	return r, nil
}

// writeConfig writes the replica's Configuration, read at its next start.
func (r *replica) writeConfig() error {
	if errs := r.cfg.Validate(); len(errs) > 0 {
		return fmt.Errorf("%s's configuration: %w", r.name, errs.ToAggregate())
	}
	b, err := yaml.Marshal(r.cfg)
	if err != nil {
		return fmt.Errorf("encoding %s's configuration: %w", r.name, err)
	}
	if err := os.WriteFile(r.configPath, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", r.configPath, err)
	}
	return nil
}

// setDrainPeriod sets the drainPeriod the replica runs with from its next
// start.
func (r *replica) setDrainPeriod(d time.Duration) error {
	r.cfg.DrainPeriod.Duration = d
	return r.writeConfig()
}

// start runs the replica with GOMAXPROCS=1 and the manager's memory limit.
func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening %s's log: %w", r.name, err)
	}
	fmt.Fprintf(f, "---- %s: starting %s\n", time.Now().Format(time.RFC3339Nano), r.name)
	//nolint:gosec // the binary make build wrote.
	cmd := exec.Command(r.binary, "serve", "--config", r.configPath, "--kubeconfig", r.kubeconfig, "--zap-time-encoding=rfc3339nano")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "MODELGATE_MEMORY_LIMIT="+memoryLimit, "POD_NAMESPACE=modelgate-system")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	exited := make(chan struct{})
	r.cmd, r.exited, r.err = cmd, exited, nil
	go func() {
		err := cmd.Wait()
		_ = f.Close()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(exited)
	}()
	return nil
}

// pid is the running process's id.
func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd.Process.Pid
}

// alive reports whether the process runs.
func (r *replica) alive() bool {
	r.mu.Lock()
	ch := r.exited
	r.mu.Unlock()
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// exitErr describes how the process ended.
func (r *replica) exitErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// terminate sends SIGTERM and waits for the exit; it kills the process
// after stopTimeout. It returns how long the exit took.
func (r *replica) terminate() (time.Duration, error) {
	r.mu.Lock()
	cmd, ch := r.cmd, r.exited
	r.mu.Unlock()
	started := time.Now()
	select {
	case <-ch:
		return 0, nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch:
		return time.Since(started), nil
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-ch
		return time.Since(started), fmt.Errorf("%s did not exit within %s of SIGTERM: killed", r.name, stopTimeout)
	}
}

// ready reports whether /readyz answers 200.
func (r *replica) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.healthAddr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitReady polls /readyz until it answers 200.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !r.ready(ctx) {
		if !r.alive() {
			exit := r.exitErr()
			if exit == nil {
				exit = errors.New("exit status 0")
			}
			return fmt.Errorf("%s exited (%w) before it was ready; last lines of %s:\n%s", r.name, exit, r.logPath, cluster.Tail(r.logPath, 15))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s; see %s", r.name, timeout, r.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// rss is the process's resident set size in bytes, from /proc.
func (r *replica) rss() (int64, error) {
	return rssOf(r.pid())
}

// rssOf reads VmRSS of a process.
func rssOf(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, fmt.Errorf("reading RSS: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS %q: %w", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}

// scraper reads a replica's metrics the way a Prometheus allowed to get
// /metrics does: over HTTPS (the replica's self-signed certificate, not
// verified, as docs/operations.md says to scrape), with a bearer token the
// API server authenticates and authorizes.
type scraper struct {
	token  string
	client *http.Client
}

func newScraper(token string) *scraper {
	return &scraper{token: token, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		//nolint:gosec // the metrics certificate is self-signed; the token authenticates.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}}
}

// scrape returns the replica's metrics as text.
func (s *scraper) scrape(ctx context.Context, r *replica) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("building the metrics request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", r.name, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, fmt.Errorf("scraping %s: %w", r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: %s: %s", r.name, resp.Status, strings.TrimSpace(buf.String()))
	}
	return buf.Bytes(), nil
}

// sample is what a scrape and /proc say about a replica at one moment.
type sample struct {
	at         time.Time
	rss        int64
	goroutines float64
	heapInuse  float64
}

// sampleOf reads the replica's RSS and its go_goroutines and
// go_memstats_heap_inuse_bytes.
func (s *scraper) sampleOf(ctx context.Context, r *replica) (sample, error) {
	out := sample{at: time.Now()}
	var err error
	if out.rss, err = r.rss(); err != nil {
		return sample{}, err
	}
	text, err := s.scrape(ctx, r)
	if err != nil {
		return sample{}, err
	}
	if out.goroutines, err = gauge(text, "go_goroutines"); err != nil {
		return sample{}, err
	}
	if out.heapInuse, err = gauge(text, "go_memstats_heap_inuse_bytes"); err != nil {
		return sample{}, err
	}
	return out, nil
}

// gauge reads an unlabelled gauge from Prometheus text.
func gauge(text []byte, name string) (float64, error) {
	for line := range bytes.SplitSeq(text, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte(name+" "))
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(rest)), 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %s: %w", name, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("no %s in the metrics", name)
}

// sumSeries adds up every series of a counter whose line contains all of
// the label matchers (`kind="other"`), from Prometheus text.
func sumSeries(text []byte, name string, matchers ...string) float64 {
	var total float64
	for line := range strings.SplitSeq(string(text), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range matchers {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return total
}
