package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// WriteKubeconfig writes a user's kubeconfig, readable by the owner only.
func WriteKubeconfig(u *envtest.AuthenticatedUser, path string) error {
	b, err := u.KubeConfig()
	if err != nil {
		return fmt.Errorf("building kubeconfig: %w", err)
	}
	if _, err := clientcmd.Load(b); err != nil {
		return fmt.Errorf("checking kubeconfig: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// writeConfiguration writes the Configuration modelgate serves with: the
// envtest-generated certificates and port, metrics on metricsAddr (or
// off), health on healthAddr, then the caller's edits, and returns it.
func writeConfiguration(te *envtest.Environment, healthAddr, metricsAddr, path string, edit func(*config.Configuration)) (*config.Configuration, error) {
	c := env.Configuration(te)
	c.Metrics.BindAddress = metricsAddr
	// The simulated cluster's scrapers (make bench-e2e) read modelgate's
	// metrics over plain HTTP on loopback; installs serve them securely.
	insecure := false
	c.Metrics.Secure = &insecure
	c.Health.BindAddress = healthAddr
	// Both report kinds, whose CRDs the cluster installs: the audit's
	// results can be read as PolicyReports and as OpenReports Reports.
	c.Audit.Reports = []string{config.ReportsWGPolicy, config.ReportsOpenReports}
	if edit != nil {
		edit(c)
	}
	if errs := c.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("modelgate's configuration: %w", errs.ToAggregate())
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return c, nil
}

// FreeAddr returns a free 127.0.0.1 address.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// waitHTTPOK polls url until it answers 200, the process exits or the
// timeout passes.
func waitHTTPOK(ctx context.Context, url string, p *process, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, p.exitError()
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, fmt.Errorf("building a request for %s: %w", url, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet: poll again.
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s was not ready within %s (%w); see %s", p.name, timeout, err, p.log)
	}
	return err
}

// waitInjection waits until the API server calls modelgate's mutating
// webhook: envtest creates the webhook configurations, and kube-apiserver
// loads them from a watch, a moment later; a workload created before
// would not be injected. A server-side dry run of an opted-in Pod comes
// back injected.
func waitInjection(ctx context.Context, c client.Client, p *process) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, startTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, p.exitError()
		default:
		}
		probe := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "injection-probe", Annotations: map[string]string{
				annotations.Inject: "true",
				annotations.Model:  "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
				annotations.Engine: "vllm",
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "vllm/vllm-openai:v0.9.1"}}},
		}
		if last = c.Create(ctx, probe, client.DryRunAll); last != nil {
			// The webhook may refuse calls for a moment after its
			// configuration is loaded: ask again, and report the last
			// answer if it never changes.
			return false, nil //nolint:nilerr // polled again; the last error is reported on timeout
		}
		_, injected := probe.Annotations[annotations.Injected]
		if !injected {
			last = errors.New("the dry run came back without modelgate's injection")
		}
		return injected, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the API server to call modelgate's mutating webhook (a dry run of an opted-in Pod): %w", errors.Join(err, last))
	}
	return nil
}

// modelgateStart is how the cluster starts modelgate.
type modelgateStart struct {
	binary, log, health string
	args                []string
	output              io.Writer
}

// start starts modelgate and waits until it is ready.
func (m modelgateStart) start(ctx context.Context) (*process, error) {
	p, err := startProcess("modelgate", m.binary, m.args, m.log, m.output)
	if err != nil {
		return nil, err
	}
	if err := waitHTTPOK(ctx, "http://"+m.health+"/readyz", p, startTimeout); err != nil {
		return p, err
	}
	return p, nil
}

// RestartModelgate stops modelgate, applies edit to its Configuration and
// starts it again on the same addresses, waiting until it is ready: a
// benchmark compares two settings in one cluster.
func (c *Cluster) RestartModelgate(ctx context.Context, edit func(*config.Configuration)) error {
	// The edit is checked before modelgate goes down.
	if _, err := editConfiguration(c.Configuration, c.Configuration, edit); err != nil {
		return err
	}
	if err := c.StopModelgate(); err != nil {
		return err
	}
	return c.StartModelgate(ctx, nil)
}

// StopModelgate stops modelgate; the stop is not reported on Failed.
// Until StartModelgate, the API server's calls to its webhooks fail.
func (c *Cluster) StopModelgate() error {
	old := c.modelgate
	old.retired.Store(true)
	return old.stop()
}

// StartModelgate applies edit (when not nil) to the Configuration of the
// modelgate StopModelgate stopped and starts it again on the same
// addresses, waiting until it is ready. The new process logs to a file of
// its own (modelgate-<n>.log beside modelgate.log).
func (c *Cluster) StartModelgate(ctx context.Context, edit func(*config.Configuration)) error {
	if edit != nil {
		if _, err := editConfiguration(c.Configuration, c.Configuration, edit); err != nil {
			return err
		}
	}
	m := c.restart
	m.log = strings.TrimSuffix(m.log, ".log") + "-" + strconv.Itoa(len(c.procs)) + ".log"
	p, err := m.start(ctx)
	if p != nil {
		c.procs = append(c.procs, p)
		c.modelgate = p
		c.watch(p)
	}
	return err
}

// Replica is a second modelgate process StartReplica started.
type Replica struct {
	// Configuration is its Configuration's file.
	Configuration string
	// MetricsAddr is where it serves metrics ("0": nowhere).
	MetricsAddr string
}

// StartReplica starts another modelgate beside the cluster's, as its
// service account, with the Configuration of the cluster's modelgate on
// free webhook, health and metrics ports, then edit; it waits until the
// replica is ready. The API server's webhooks still call the cluster's
// modelgate: a replica reads and serves what every replica does (the
// policies in force, its metrics), which a test compares. Stop stops it.
func (c *Cluster) StartReplica(ctx context.Context, name string, edit func(*config.Configuration)) (*Replica, error) {
	webhookAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	health, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	_, port, err := net.SplitHostPort(webhookAddr)
	if err != nil {
		return nil, err
	}
	webhookPort, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(filepath.Dir(c.Configuration), "configuration-"+name+".yaml")
	cfg, err := editConfiguration(c.Configuration, path, func(cfg *config.Configuration) {
		cfg.Webhook.Port = int32(webhookPort) //nolint:gosec // parsed as 32 bits
		cfg.Health.BindAddress = health
		if cfg.Metrics.BindAddress != "0" {
			cfg.Metrics.BindAddress = metrics
		}
		if edit != nil {
			edit(cfg)
		}
	})
	if err != nil {
		return nil, err
	}
	m := c.restart
	m.args = slices.Clone(m.args)
	for i, a := range m.args {
		if a == c.Configuration {
			m.args[i] = path
		}
	}
	m.log = strings.TrimSuffix(m.log, ".log") + "-" + name + ".log"
	m.health = cfg.Health.BindAddress
	p, err := m.start(ctx)
	if p != nil {
		c.procs = append(c.procs, p)
		c.watch(p)
	}
	if err != nil {
		return nil, err
	}
	return &Replica{Configuration: path, MetricsAddr: cfg.Metrics.BindAddress}, nil
}

// editConfiguration reads the Configuration in src, applies edit, checks
// it and writes it to dst.
func editConfiguration(src, dst string, edit func(*config.Configuration)) (*config.Configuration, error) {
	cfg, err := config.Load(src)
	if err != nil {
		return nil, fmt.Errorf("reading modelgate's configuration: %w", err)
	}
	edit(cfg)
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("modelgate's configuration: %w", errs.ToAggregate())
	}
	cfg.RecordKey = nil
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return nil, fmt.Errorf("writing %s: %w", dst, err)
	}
	return cfg, nil
}
