// Package cluster starts a small simulated GPU cluster for `make run`, the
// e2e suite and the end-to-end benchmark: envtest's etcd and
// kube-apiserver (test/harnesses/env, with modelgate's CRDs and webhook
// configurations from config/), the real kube-controller-manager and
// kube-scheduler, kwok playing the kubelets of fake GPU nodes
// (config/dev/nodes.yaml), and the modelgate binary serving the webhooks
// as its own service account. Every component is a child process; Stop
// ends them all.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/standins/dradriver"
	"github.com/modelgate/modelgate/webhook"
)

// Defaults for Options.
const (
	DefaultClientQPS   = 100
	DefaultClientBurst = 200
	startTimeout       = 60 * time.Second
	// pollInterval is how often Start checks what it waits for.
	pollInterval = 100 * time.Millisecond
)

// Options configure Start.
type Options struct {
	// Root is the repository root (env.RepoRoot).
	Root string
	// Dir holds the kubeconfigs, configurations and logs/; it is created.
	Dir string
	// Nodes is the file of fake nodes; default config/dev/nodes.yaml.
	Nodes string
	// Modelgate is the modelgate binary to run.
	Modelgate string
	// ModelgateOutput, when set, gets modelgate's output as well as its log.
	ModelgateOutput io.Writer
	// User is the developer's user name: a cluster admin, authenticating
	// with a client certificate, as a human with kubectl would.
	User string
	// ClientQPS and ClientBurst limit the scheduler's and the
	// controller-manager's API clients (their own defaults are 50/100 and
	// 20/30, tuned for big clusters' API servers, not for a test).
	ClientQPS, ClientBurst int
	// MetricsAddr is where modelgate serves metrics; empty turns them off.
	MetricsAddr string
	// Configure edits modelgate's Configuration before it is written.
	Configure func(*config.Configuration)
	// ExtraRBAC are kustomize directories, under Root, of permissions
	// modelgate gets beside config/rbac's (config/self-managed/rbac for
	// certificates.mode self).
	ExtraRBAC []string
	// RealNode says whether to start the real node beside kwok's, and how.
	RealNode RealNodeOptions
	// Install says how modelgate is installed: by the harness, as a
	// process of this machine (the default), or not at all.
	Install Install
	// Backstop installs modelgate as policy.backstop has it: the
	// Configuration's policy.backstop on (the WorkloadPolicies' CEL forms
	// in force as ValidatingAdmissionPolicies) and the webhooks of
	// webhook.FailOpenWithBackstop failing open.
	Backstop bool
}

// Install says how Start installs modelgate.
type Install int

const (
	// InstallHostProcess runs Options.Modelgate as a process of this
	// machine, as its own service account with config/rbac's permissions,
	// behind config/'s CRDs and webhook configurations (pointing at it),
	// which Start installs: fast to start and to restart, for `make run`
	// and most suites.
	InstallHostProcess Install = iota
	// InstallNone installs nothing of modelgate (no CRDs, webhook
	// configurations, identity or process): the caller installs it as a
	// user does, with the chart or config/default, into Pods on the real
	// node (RealNodeOptions.ModelgateImages names its image).
	InstallNone
)

// Cluster is a running simulated cluster.
type Cluster struct {
	// Env is the envtest environment (etcd, kube-apiserver).
	Env *envtest.Environment
	// Admin is envtest's administrator.
	Admin *rest.Config
	// Developer is Options.User's configuration, and Kubeconfig its file.
	Developer  *rest.Config
	Kubeconfig string
	// Configuration is the file modelgate serves with.
	Configuration string
	// Nodes are the fake nodes, as registered.
	Nodes []*corev1.Node
	// LogDir holds every component's log.
	LogDir string
	// RealNode is the real node (kubelet, containerd), nil when it was not
	// started; RealNodeSkipped says in one line why, when
	// RealNodeIfPossible could not start it.
	RealNode        *RealNode
	RealNodeSkipped string

	// loaderImage is the Configuration's loader image, which the real
	// node's registry serves as modelgate's image.
	loaderImage string

	procs []*process
	// modelgate is the modelgate process among procs, and how to start it
	// again (RestartModelgate).
	modelgate *process
	restart   modelgateStart
	stopped   chan struct{}
	failed    chan error
}

// Start starts the cluster and returns once the nodes are Ready, the
// controllers run and modelgate is ready. On error it stops whatever it
// had started.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	o = withDefaults(o)
	bins, err := findBinaries(o.Root)
	if err != nil {
		return nil, err
	}
	nodes, err := LoadNodes(o.Nodes)
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(o.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return nil, fmt.Errorf("creating %s: %w", logDir, err)
	}
	te, err := env.New(o.Root)
	if err != nil {
		return nil, err
	}
	if o.Install == InstallNone {
		te.CRDs = nil
		te.WebhookInstallOptions = envtest.WebhookInstallOptions{}
	}
	if o.Backstop {
		if err := env.FailOpen(te, webhook.FailOpenWithBackstop); err != nil {
			return nil, err
		}
	}
	// The PolicyReport and OpenReports CRDs, so that the audit's reports
	// can be read with kubectl get policyreports,reports -A, as in a
	// cluster with Kyverno.
	for _, dir := range []string{"policyreport", "openreports"} {
		reports, err := env.CRDs(filepath.Join(o.Root, "config", dir))
		if err != nil {
			return nil, err
		}
		te.CRDs = append(te.CRDs, reports...)
	}
	var node *RealNode
	skipped := ""
	if o.RealNode.Mode != RealNodeOff {
		node, err = prepareRealNode(o.Root, o.Dir, logDir, o.RealNode, te)
		var unavailable *NodeUnavailableError
		switch {
		case err == nil:
		case o.RealNode.Mode == RealNodeIfPossible && errors.As(err, &unavailable):
			skipped = err.Error()
		default:
			return nil, fmt.Errorf("the real node: %w", err)
		}
	}
	admin, err := te.Start()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting etcd and kube-apiserver: %w", err), node.Stop())
	}
	c = &Cluster{Env: te, Admin: admin, LogDir: logDir, RealNodeSkipped: skipped, stopped: make(chan struct{}), failed: make(chan error, 8)}
	c.RealNode = node
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	adminClient, err := client.New(admin, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return c, fmt.Errorf("creating a client: %w", err)
	}
	if err := c.startComponents(ctx, o, bins, adminClient); err != nil {
		return c, err
	}
	if err := RegisterNodes(ctx, adminClient, nodes); err != nil {
		return c, err
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	if err := WaitNodesReady(ctx, adminClient, names, startTimeout); err != nil {
		return c, err
	}
	// NVIDIA's DRA driver's DeviceClasses and the fake GPU nodes' devices,
	// so that Pods with resource claims are scheduled too.
	if err := dradriver.Publish(ctx, adminClient, nodes); err != nil {
		return c, err
	}
	c.Nodes = nodes
	if err := waitControllers(ctx, adminClient); err != nil {
		return c, err
	}
	if c.RealNode != nil {
		if err := c.RealNode.start(ctx, te, adminClient, c.loaderImage, c.failed); err != nil {
			return c, fmt.Errorf("starting the real node: %w", err)
		}
	}
	c.watchFailures()
	return c, nil
}

func withDefaults(o Options) Options {
	if o.Nodes == "" {
		o.Nodes = filepath.Join(o.Root, "config", "dev", "nodes.yaml")
	}
	if o.ClientQPS == 0 {
		o.ClientQPS = DefaultClientQPS
	}
	if o.ClientBurst == 0 {
		o.ClientBurst = DefaultClientBurst
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "0"
	}
	return o
}

// startComponents writes each component's identity and configuration and
// starts the controller-manager, the scheduler, kwok and modelgate, then
// waits for modelgate's readiness.
func (c *Cluster) startComponents(ctx context.Context, o Options, bins binaries, admin client.Client) error {
	kubeconfig := func(u envtest.User, file string) (*envtest.AuthenticatedUser, string, error) {
		au, err := c.Env.AddUser(u, nil)
		if err != nil {
			return nil, "", fmt.Errorf("adding user %s: %w", u.Name, err)
		}
		path := filepath.Join(o.Dir, file)
		return au, path, WriteKubeconfig(au, path)
	}
	// The scheduler runs as itself, with the bootstrap RBAC a cluster
	// gives it. The controller-manager uses shared credentials and so
	// needs every controller's permissions; kwok plays every kubelet.
	_, schedKC, err := kubeconfig(envtest.User{Name: "system:kube-scheduler"}, "kube-scheduler.kubeconfig")
	if err != nil {
		return err
	}
	_, kcmKC, err := kubeconfig(envtest.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}}, "kube-controller-manager.kubeconfig")
	if err != nil {
		return err
	}
	_, kwokKC, err := kubeconfig(envtest.User{Name: "kwok", Groups: []string{"system:masters"}}, "kwok.kubeconfig")
	if err != nil {
		return err
	}
	dev, devKC, err := kubeconfig(envtest.User{Name: o.User, Groups: []string{"system:masters"}}, "kubeconfig")
	if err != nil {
		return err
	}
	c.Developer, c.Kubeconfig = dev.Config(), devKC

	rootCA := filepath.Join(o.Dir, "apiserver-ca.crt")
	if err := os.WriteFile(rootCA, c.Env.ControlPlane.APIServer.CA, 0o600); err != nil {
		return fmt.Errorf("writing the API server's CA: %w", err)
	}
	schedCfg := filepath.Join(o.Dir, "kube-scheduler.yaml")
	if err := schedulerConfig(schedCfg, schedKC, o.ClientQPS, o.ClientBurst); err != nil {
		return err
	}
	for _, s := range []struct {
		name, binary string
		args         []string
	}{
		{"kube-controller-manager", bins.controllerManager, controllerManagerArgs(kcmKC, c.serviceAccountKey(), rootCA, o.ClientQPS, o.ClientBurst)},
		{"kube-scheduler", bins.scheduler, schedulerArgs(schedCfg)},
		{"kwok", bins.kwok, kwokArgs(bins, kwokKC)},
	} {
		p, err := startProcess(s.name, s.binary, s.args, filepath.Join(c.LogDir, s.name+".log"), nil)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
	}
	if o.Install == InstallNone {
		c.loaderImage = NodeLoaderImage
		return nil
	}
	return c.startModelgate(ctx, o, admin)
}

// startModelgate installs modelgate's identity, writes its kubeconfig and
// Configuration, starts it and waits for its readiness.
func (c *Cluster) startModelgate(ctx context.Context, o Options, admin client.Client) error {
	// modelgate runs with config/rbac's permissions only, as in a cluster.
	mg, err := env.ModelgateIdentity(ctx, c.Env, admin, o.Root, o.ExtraRBAC...)
	if err != nil {
		return err
	}
	mgKC := filepath.Join(o.Dir, "modelgate.kubeconfig")
	if err := WriteKubeconfig(mg, mgKC); err != nil {
		return err
	}
	healthAddr, err := FreeAddr()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(o.Dir, "configuration.yaml")
	configure := o.Configure
	if o.Backstop {
		configure = func(cfg *config.Configuration) {
			cfg.Policy.Backstop = ptr.To(true)
			if o.Configure != nil {
				o.Configure(cfg)
			}
		}
	}
	if before := configure; c.RealNode != nil {
		// The loader runs on the real node from modelgate's image, which
		// its registry serves under the name the Configuration ends with
		// (this one, unless the caller's edits change it).
		configure = func(cfg *config.Configuration) {
			cfg.Injection.Loader.Image = NodeLoaderImage
			if before != nil {
				before(cfg)
			}
		}
	}
	cfg, err := writeConfiguration(c.Env, healthAddr, o.MetricsAddr, cfgPath, configure)
	if err != nil {
		return err
	}
	c.Configuration = cfgPath
	c.loaderImage = cfg.Injection.Loader.Image
	c.restart = modelgateStart{binary: o.Modelgate, args: []string{"serve", "--config", cfgPath, "--kubeconfig", mgKC},
		log: filepath.Join(c.LogDir, "modelgate.log"), output: o.ModelgateOutput, health: healthAddr}
	p, err := c.restart.start(ctx)
	if p != nil {
		c.procs = append(c.procs, p)
		c.modelgate = p
	}
	if err != nil {
		return err
	}
	return waitInjection(ctx, admin, p)
}

// serviceAccountKey is the key the API server verifies service account
// tokens with (envtest writes it beside its serving certificate).
func (c *Cluster) serviceAccountKey() string {
	return filepath.Join(c.Env.ControlPlane.APIServer.CertDir, "sa-signer.key")
}

// waitControllers waits until the controller-manager's controllers run:
// the service account controller has created "default" in "default".
func waitControllers(ctx context.Context, c client.Client) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, pollInterval, startTimeout, true, func(ctx context.Context) (bool, error) {
		last = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
		if last != nil && !apierrors.IsNotFound(last) {
			return false, last
		}
		return last == nil, nil
	})
	if wait.Interrupted(err) {
		err = errors.Join(err, last)
	}
	if err != nil {
		return fmt.Errorf("waiting for kube-controller-manager (the default service account): %w", err)
	}
	return nil
}

// watchFailures reports on Failed any component that exits before Stop.
func (c *Cluster) watchFailures() {
	for _, p := range c.procs {
		c.watch(p)
	}
}

// watch reports p on Failed when it exits before Stop and was not retired.
func (c *Cluster) watch(p *process) {
	go func() {
		select {
		case <-p.Exited():
			select {
			case <-c.stopped:
			default:
				if !p.retired.Load() {
					c.failed <- p.exitError()
				}
			}
		case <-c.stopped:
		}
	}()
}

// Failed delivers an error when a component exits on its own.
func (c *Cluster) Failed() <-chan error { return c.failed }

// Stop stops every component (SIGTERM, then SIGKILL after 40s), then
// kube-apiserver and etcd. It is safe to call more than once.
func (c *Cluster) Stop() error {
	select {
	case <-c.stopped:
		return nil
	default:
		close(c.stopped)
	}
	err := c.RealNode.stopNode()
	err = errors.Join(err, stopAll(c.procs))
	if stopErr := c.Env.Stop(); stopErr != nil {
		err = errors.Join(err, fmt.Errorf("stopping etcd and kube-apiserver: %w", stopErr))
	}
	return errors.Join(err, c.RealNode.Stop())
}
