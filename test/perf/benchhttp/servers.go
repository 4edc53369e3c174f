package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/webhook"
)

// serverFlags are a server mode's flags: where to listen, the directory
// holding the certificate (tls.crt, tls.key) and the record key
// (record-key), and the repository root.
func serverFlags(name string, args []string) (addr, dir, root, profile string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&addr, "addr", "127.0.0.1:0", "host:port to serve on")
	fs.StringVar(&dir, "cert-dir", "", "directory holding tls.crt, tls.key and record-key")
	fs.StringVar(&root, "root", ".", "the repository root")
	fs.StringVar(&profile, "profile", "", "write <profile>.cpu.pprof and <profile>.allocs.pprof when stopped")
	err = fs.Parse(args)
	return addr, dir, root, profile, err
}

// profiled runs serve with the CPU profiled into <prefix>.cpu.pprof, and
// writes the allocation profile to <prefix>.allocs.pprof after it; no
// profile when prefix is empty.
func profiled(prefix string, serve func() error) error {
	if prefix == "" {
		return serve()
	}
	f, err := os.Create(prefix + ".cpu.pprof") //nolint:gosec // --profile: the operator names the path
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	serr := serve()
	pprof.StopCPUProfile()
	a, err := os.Create(prefix + ".allocs.pprof") //nolint:gosec // --profile: the operator names the path
	if err != nil {
		return err
	}
	defer a.Close()
	if err := pprof.Lookup("allocs").WriteTo(a, 0); err != nil {
		return err
	}
	return serr
}

// serveModelgate serves modelgate's workload webhooks as `modelgate serve`
// does (webhook.NewWorkloadServer: TLS, limits, handlers, metrics, its
// production logger), with the library's policies in force and the
// namespace labels from a fixed table, until SIGTERM.
// Without cache, the decision cache is off (policy.decisionCache.maxBytes
// 0): every validating review is evaluated.
func serveModelgate(args []string, cache bool) error {
	addr, certDir, root, profile, err := serverFlags("serve-modelgate", args)
	if err != nil {
		return err
	}
	log.SetLogger(zap.New(zap.UseFlagOptions(&zap.Options{Development: false})))
	host, port, err := splitAddr(addr)
	if err != nil {
		return err
	}
	cfg := config.New()
	cfg.Webhook.Host, cfg.Webhook.Port, cfg.Webhook.CertDir = host, port, certDir
	cfg.DrainPeriod.Duration = 0
	if !cache {
		cfg.Policy.DecisionCache.MaxBytes = resource.NewQuantity(0, resource.BinarySI)
	}
	secret, err := os.ReadFile(filepath.Join(certDir, "record-key")) //nolint:gosec // --cert-dir: the operator names the folder
	if err != nil {
		return err
	}
	if cfg.RecordKey, err = seal.New(secret); err != nil {
		return err
	}
	compiled, err := libraryPolicies(root)
	if err != nil {
		return err
	}
	srv := webhook.NewWorkloadServer(cfg, fixedNamespaces, compiled)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return profiled(profile, func() error { return srv.Start(ctx) })
}

// answerFile, in the certificate directory, is the answer the answering
// floor sends: /mutate's AdmissionResponse to the load's review, without
// its UID (see mutateAnswer).
const answerFile = "mutate-answer.json"

// serveFloor is the floor: a TLS server with modelgate's TLS settings that
// decodes each AdmissionReview and answers allowed, doing nothing else.
// With answer (serve-floor-answer), it answers with the AdmissionResponse
// in answerFile instead: /mutate's own answer, its patch and warnings, so
// that the two floors differ only by what the answer carries.
func serveFloor(args []string, answer bool) error {
	name := "serve-floor"
	if answer {
		name = "serve-floor-answer"
	}
	addr, certDir, _, profile, err := serverFlags(name, args)
	if err != nil {
		return err
	}
	var resp *admissionv1.AdmissionResponse
	if answer {
		raw, err := os.ReadFile(filepath.Join(certDir, answerFile)) //nolint:gosec // --cert-dir: the operator names the folder
		if err != nil {
			return err
		}
		resp = &admissionv1.AdmissionResponse{}
		if err := json.Unmarshal(raw, resp); err != nil {
			return fmt.Errorf("%s: %w", answerFile, err)
		}
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return fmt.Errorf("loading the certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}}
	webhook.TLSOptions(config.New().Webhook)(tc)
	srv := &http.Server{Addr: addr, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second, Handler: floorHandler(resp)}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	return profiled(profile, func() error {
		if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}

// floorHandler decodes each review and answers it with answer, allowed
// when answer is nil, under the review's UID.
func floorHandler(answer *admissionv1.AdmissionResponse) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		resp := admissionv1.AdmissionResponse{Allowed: true}
		if answer != nil {
			resp = *answer
		}
		resp.UID = review.Request.UID
		review.Response, review.Request = &resp, nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}
}

// server is a server process under test.
type server struct {
	name string
	addr string
	cmd  *exec.Cmd
}

// startServer runs this binary in a server mode, pinned to cpu, and waits
// until it accepts TLS connections.
func startServer(ctx context.Context, mode, cpu, certDir, root, logPath, profile string) (*server, error) {
	addr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary: %w", err)
	}
	argv := []string{self, mode, "--addr", addr, "--cert-dir", certDir, "--root", root, "--profile", profile}
	if cpu != "" {
		if taskset, err := exec.LookPath("taskset"); err == nil {
			argv = append([]string{taskset, "-c", cpu}, argv...)
		}
	}
	logf, err := os.Create(logPath) //nolint:gosec // the benchmark's own log path
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // this binary, in a mode of its own.
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", mode, err)
	}
	s := &server{name: mode, addr: addr, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe.
		if err == nil {
			_ = conn.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not listen on %s within 30s (see %s)", mode, addr, logPath)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peakRSS is the server's peak resident memory so far (VmHWM), in bytes;
// 0 where /proc cannot tell.
func (s *server) peakRSS() int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return vmHWM(status)
}

// vmHWM reads VmHWM (kB) from a /proc/PID/status, in bytes; 0 without it.
func vmHWM(status []byte) int64 {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

// pinSelf runs this process again pinned to cpu (taskset), once.
func pinSelf(cpu string) error {
	if cpu == "" || os.Getenv("BENCH_HTTP_PINNED") != "" {
		return nil
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-http: no taskset: nothing is pinned, the figures mix the load and the server on every core")
		return nil //nolint:nilerr // without taskset the benchmark runs unpinned, and says so
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	argv := append([]string{taskset, "-c", cpu, self}, os.Args[1:]...)
	return syscall.Exec(taskset, argv, append(os.Environ(), "BENCH_HTTP_PINNED=1")) //nolint:gosec // this binary again.
}

func splitAddr(addr string) (string, int32, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("--addr %q: %w", addr, err)
	}
	var port int32
	if _, err := fmt.Sscan(p, &port); err != nil {
		return "", 0, fmt.Errorf("--addr %q: port: %w", addr, err)
	}
	return host, port, nil
}
