// Command devcluster is `make run`: it starts a small simulated GPU cluster
// (test/harnesses/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok with the fake nodes in config/dev/nodes.yaml, and as
// root the real node) with modelgate serving its webhooks, and a Hub and an
// S3 store (on the real node's gateway, or on loopback without it) serving
// the samples' model, which the loaders reach
// through modelgate's Configuration. It writes bin/dev/kubeconfig, prints
// the nodes and then where each pod lands, and on Ctrl-C stops everything
// it started. With --install helm (make run INSTALL=helm) modelgate is
// not a process of this machine but the chart, installed by helm as the
// README has users do, into Pods on the real node, with cert-manager's own
// controllers issuing its certificate (helm.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "modelgate", "bin/modelgate", "the modelgate binary to run")
	flag.StringVar(&o.user, "user", defaultUser(), "the user name in bin/dev/kubeconfig (becomes the owner label)")
	flag.StringVar(&o.nodes, "nodes", "", "the fake nodes to register (default config/dev/nodes.yaml)")
	flag.StringVar(&o.dir, "dir", "", "the folder for the kubeconfig, configurations and logs/ (default bin/dev)")
	realNode := flag.String("real-node", "auto", "the real node (kubelet + containerd): auto (when root and the machine allows it), on (fail without it) or off")
	flag.StringVar(&o.prometheus, "prometheus", "", "a prometheus binary to run beside the cluster, scraping modelgate with config/prometheus's objects (make run PROMETHEUS=1); empty: none")
	flag.StringVar(&o.operator, "prometheus-operator", "", "the Prometheus Operator binary that generates --prometheus's configuration from config/prometheus's objects; required with --prometheus")
	flag.StringVar(&o.install, "install", installHost, "how modelgate is installed: host (bin/modelgate as a process of this machine) or helm (the chart, by --helm, into Pods on the real node, with cert-manager: make run INSTALL=helm)")
	flag.StringVar(&o.helm, "helm", "", "the helm binary that installs the chart (required with --install helm)")
	flag.StringVar(&o.certManager, "cert-manager", "", "cert-manager's controllers and CRDs, as make cert-manager builds them, for --install helm (default bin/cert-manager/<version>)")
	flag.Parse()
	var err error
	if o.realNode, err = realNodeMode(*realNode); err == nil {
		err = o.check()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(1)
	}
}

// options are devcluster's flags.
type options struct {
	binary, user, nodes, dir string
	realNode                 cluster.RealNodeMode
	prometheus, operator     string
	install, helm            string
	certManager              string
}

// check refuses flags that do not go together, each in one line.
func (o *options) check() error {
	if (o.prometheus == "") != (o.operator == "") {
		return errors.New("--prometheus and --prometheus-operator go together")
	}
	switch o.install {
	case installHost:
		return nil
	case installHelm:
	default:
		return fmt.Errorf("--install=%q: must be host or helm", o.install)
	}
	switch {
	case o.helm == "":
		return errors.New("--install helm needs --helm, the helm binary (make run INSTALL=helm gives it)")
	case o.realNode == cluster.RealNodeOff:
		return errors.New("--install helm needs the real node, the one node that runs containers: leave out --real-node off")
	case o.prometheus != "":
		return errors.New("--prometheus works with --install host only (its configuration scrapes modelgate as a process of this machine): leave out PROMETHEUS=1 with INSTALL=helm")
	}
	// Only the real node runs modelgate's Pods: it must start.
	o.realNode = cluster.RealNodeRequired
	return nil
}

func defaultUser() string {
	if u := os.Getenv("USER"); u != "" && u != "root" {
		return u
	}
	return "developer"
}

// devFiles are what run writes into bin/dev and removes on exit; logs/
// stays for a look after the fact.
var devFiles = []string{
	"kubeconfig", "modelgate.kubeconfig", "kube-scheduler.kubeconfig", "kube-controller-manager.kubeconfig",
	"kwok.kubeconfig", "kube-scheduler.yaml", "configuration.yaml",
	// --install helm's values and helm's own folders.
	"values.yaml", "helm",
}

// realNodeMode parses --real-node.
func realNodeMode(s string) (cluster.RealNodeMode, error) {
	switch s {
	case "auto":
		return cluster.RealNodeIfPossible, nil
	case "on":
		return cluster.RealNodeRequired, nil
	case "off":
		return cluster.RealNodeOff, nil
	}
	return 0, fmt.Errorf("--real-node=%q: must be auto, on or off", s)
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := env.RepoRoot()
	if err != nil {
		return err
	}
	devDir := o.dir
	if devDir == "" {
		devDir = filepath.Join(root, "bin", "dev")
	}
	if err := os.MkdirAll(devDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", devDir, err)
	}
	helm := o.install == installHelm
	if o.certManager == "" {
		o.certManager = certmanager.Dir(root)
	}

	started := time.Now()
	// The samples' model source starts once the cluster has its network:
	// where the real node runs, its Pods reach the host at the node's
	// gateway only.
	var models *modelSource
	var modelsErr error
	defer func() {
		if models != nil {
			models.Close()
		}
	}()
	startModels := func() {
		host := "127.0.0.1"
		if cluster.PodNetworkUp() {
			host = cluster.NodeGateway
		}
		models, modelsErr = startModelSource(host)
	}
	metricsAddr, err := cluster.FreeAddr()
	if err != nil {
		return err
	}
	opts := cluster.Options{
		Root: root, Dir: devDir, Nodes: o.nodes, Modelgate: o.binary, ModelgateOutput: os.Stdout, User: o.user,
		Configure: func(cfg *config.Configuration) {
			startModels()
			if modelsErr == nil {
				configureLoader(cfg, models)
			}
			configureMetrics(cfg, metricsAddr)
		},
		// Tainted: only Pods that tolerate it land there, which in
		// "default" are the serving Pods (labelDefaultNamespace).
		RealNode: cluster.RealNodeOptions{Mode: o.realNode, Taint: true},
		// The backstop on, as a demanding install runs: the sample
		// policies' CEL forms are ValidatingAdmissionPolicies the API
		// server enforces itself, so a stopped or hung modelgate leaves
		// them in force (injection and modelgate's own checks fail open).
		Backstop: true,
	}
	if helm {
		fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and the real node, then cert-manager and the chart ...")
		// Nothing of modelgate but its image, which the node's registry
		// serves under the chart's reference; the chart installs the rest,
		// with its own defaults (the backstop off).
		image, err := chartImage(root)
		if err != nil {
			return err
		}
		opts.Install, opts.Configure, opts.Backstop = cluster.InstallNone, nil, false
		opts.RealNode.ModelgateImages = []string{image}
	} else {
		fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and modelgate ...")
	}
	c, err := cluster.Start(ctx, opts)
	defer func() {
		for _, f := range devFiles {
			_ = os.RemoveAll(filepath.Join(devDir, f))
		}
	}()
	var unavailable *cluster.NodeUnavailableError
	if helm && errors.As(err, &unavailable) {
		return fmt.Errorf("--install helm needs the real node, the one node that runs containers, and it cannot start here: %w", unavailable)
	}
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("stopping modelgate, kwok, the scheduler, the controller-manager and the control plane ...")
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping: %v\n", err)
		}
		fmt.Println("stopped; nothing left running")
	}()
	if helm {
		startModels()
	}
	if modelsErr != nil {
		return modelsErr
	}

	admin, err := client.New(c.Admin, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	var (
		cm       *certmanager.CertManager
		replicas []corev1.Pod
	)
	if helm {
		if cm, replicas, err = installChart(ctx, c, admin, root, devDir, o.helm, o.certManager, models); err != nil {
			return err
		}
		defer func() {
			fmt.Println("stopping cert-manager ...")
			if err := cm.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "stopping cert-manager: %v\n", err)
			}
		}()
	}
	// The samples land in "default": give it a team, so they show the
	// modelgate.io/team label too, and send its serving Pods to the real
	// node.
	if err := labelDefaultNamespace(ctx, admin, c.RealNode != nil); err != nil {
		return err
	}
	if err := bindMetricsReader(ctx, admin); err != nil {
		return err
	}
	var prom *prometheus.Server
	if o.prometheus != "" {
		var stopProm func()
		if prom, stopProm, err = startPrometheus(ctx, o.prometheus, o.operator, root, devDir, c, admin, metricsAddr); err != nil {
			return fmt.Errorf("starting prometheus: %w", err)
		}
		defer stopProm()
	}
	// What was just set up acts before make run says it is ready.
	if c.RealNode != nil {
		if err := cluster.WaitServingPlacement(ctx, admin, "default"); err != nil {
			return err
		}
	}
	if err := waitNamespaceTeam(ctx, admin, "default", sampleTeam); err != nil {
		return err
	}
	if err := waitMetricsReader(ctx, admin); err != nil {
		return err
	}
	nodeList := &corev1.NodeList{}
	if err := admin.List(ctx, nodeList); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	backstop := backstopOn
	if helm {
		backstop = backstopChart
	}
	k := printUsage(root, c.Kubeconfig, time.Since(started), cluster.NodeTable(nodeList.Items), c.LogDir, backstop)
	if helm {
		printChartMetrics(k, replicas)
		printChart(root, o.helm, k, c, cm)
	} else {
		printMetrics(k, metricsAddr)
	}
	if prom != nil {
		printPrometheus(prom)
	}
	printRealNode(c, k)

	placements := make(chan error, 1)
	go func() { placements <- printPlacements(ctx, c.Admin, nodeList.Items, os.Stdout) }()

	select {
	case <-ctx.Done():
		fmt.Println("\ninterrupted")
	case err := <-c.Failed():
		return err
	case <-promExited(prom):
		return fmt.Errorf("prometheus exited; see %s", prom.Log)
	case <-certManagerExited(cm):
		return fmt.Errorf("cert-manager exited; see %s", cm.Log())
	case err := <-placements:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("watching pods: %w", err)
		}
	}
	return nil
}

// certManagerExited is closed when cert-manager exits; never, without it.
func certManagerExited(cm *certmanager.CertManager) <-chan struct{} {
	if cm == nil {
		return nil
	}
	return cm.Exited()
}

// promExited is closed when prom exits; never, without one.
func promExited(prom *prometheus.Server) <-chan struct{} {
	if prom == nil {
		return nil
	}
	return prom.Exited()
}

// configureLoader points the loaders at the samples' model source, once
// for the cluster, and has them log their progress every second (the
// model is small).
func configureLoader(cfg *config.Configuration, models *modelSource) {
	cfg.Injection.Loader.Env = models.loaderEnv()
	cfg.Injection.Loader.Args = loaderArgs
}

// loaderArgs are the loader's arguments in make run: the default ones,
// and a progress line every second.
var loaderArgs = []string{"--uri=" + config.ArgURI, "--dest=" + config.ArgDest, "--progress-interval=1s"}

// sampleTeam is the team "default" gets in the dev cluster.
const sampleTeam = "ml-platform"

// labelDefaultNamespace gives "default" its team and, with the real
// node, the label that makes its serving Pods prefer the real node: the
// samples' loaders and engines run there in real
// containers when it fits them, and on kwok's nodes otherwise. It
// merge-patches the labels alone (no conflict with another writer of the
// namespace); the API server's admission and modelgate's webhook see them a
// moment later, which the caller waits for.
func labelDefaultNamespace(ctx context.Context, c client.Client, realNode bool) error {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "default"}, ns); err != nil {
		return fmt.Errorf("reading namespace default: %w", err)
	}
	orig := ns.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[annotations.NamespaceTeam] = sampleTeam
	if realNode {
		ns.Labels[cluster.RealNodeNamespaceLabel] = cluster.RealNodeServingValue
	}
	if err := c.Patch(ctx, ns, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("labelling namespace default: %w", err)
	}
	return nil
}
