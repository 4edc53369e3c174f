// Command devcluster is `make run`: it starts a small simulated GPU cluster
// (test/harnesses/cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok with the fake nodes in config/dev/nodes.yaml, and as
// root the real node) with modelgate serving its webhooks, and a Hub and an
// S3 store on loopback serving the samples' model, which the loaders reach
// through modelgate's Configuration. It writes bin/dev/kubeconfig, prints
// the nodes and then where each pod lands, and on Ctrl-C stops everything
// it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

func main() {
	binary := flag.String("modelgate", "bin/modelgate", "the modelgate binary to run")
	user := flag.String("user", defaultUser(), "the user name in bin/dev/kubeconfig (becomes the owner label)")
	nodes := flag.String("nodes", "", "the fake nodes to register (default config/dev/nodes.yaml)")
	dir := flag.String("dir", "", "the folder for the kubeconfig, configurations and logs/ (default bin/dev)")
	realNode := flag.String("real-node", "auto", "the real node (kubelet + containerd): auto (when root and the machine allows it), on (fail without it) or off")
	prom := flag.String("prometheus", "", "a prometheus binary to run beside the cluster, scraping modelgate with config/prometheus's objects (make run PROMETHEUS=1); empty: none")
	operator := flag.String("prometheus-operator", "", "the Prometheus Operator binary that generates --prometheus's configuration from config/prometheus's objects; required with --prometheus")
	flag.Parse()
	mode, err := realNodeMode(*realNode)
	if err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(2)
	}
	if (*prom == "") != (*operator == "") {
		fmt.Fprintln(os.Stderr, "make run: --prometheus and --prometheus-operator go together")
		os.Exit(2)
	}
	if err := run(*binary, *user, *nodes, *dir, *prom, *operator, mode); err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(1)
	}
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

func run(binary, user, nodes, devDir, promBinary, operatorBinary string, mode cluster.RealNodeMode) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := env.RepoRoot()
	if err != nil {
		return err
	}
	if devDir == "" {
		devDir = filepath.Join(root, "bin", "dev")
	}
	if err := os.MkdirAll(devDir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", devDir, err)
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
	fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and modelgate ...")
	metricsAddr, err := cluster.FreeAddr()
	if err != nil {
		return err
	}
	c, err := cluster.Start(ctx, cluster.Options{
		Root: root, Dir: devDir, Nodes: nodes, Modelgate: binary, ModelgateOutput: os.Stdout, User: user,
		Configure: func(cfg *config.Configuration) {
			host := "127.0.0.1"
			if cluster.PodNetworkUp() {
				host = cluster.NodeGateway
			}
			if models, modelsErr = startModelSource(host); modelsErr == nil {
				configureLoader(cfg, models)
			}
			configureMetrics(cfg, metricsAddr)
		},
		// Tainted: only Pods that tolerate it land there, which in
		// "default" are the serving Pods (labelDefaultNamespace).
		RealNode: cluster.RealNodeOptions{Mode: mode, Taint: true},
		// The backstop on, as a demanding install runs: the sample
		// policies' CEL forms are ValidatingAdmissionPolicies the API
		// server enforces itself, so a stopped or hung modelgate leaves
		// them in force (injection and modelgate's own checks fail open).
		Backstop: true,
	})
	defer func() {
		for _, f := range devFiles {
			_ = os.Remove(filepath.Join(devDir, f))
		}
	}()
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
	if modelsErr != nil {
		return modelsErr
	}

	admin, err := client.New(c.Admin, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
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
	if promBinary != "" {
		var stopProm func()
		if prom, stopProm, err = startPrometheus(ctx, promBinary, operatorBinary, root, devDir, c, admin, metricsAddr); err != nil {
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
	k := printUsage(root, c.Kubeconfig, time.Since(started), cluster.NodeTable(nodeList.Items), c.LogDir)
	printMetrics(k, metricsAddr)
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
	case err := <-placements:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("watching pods: %w", err)
		}
	}
	return nil
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
	cfg.Injection.Loader.Args = []string{"--uri=" + config.ArgURI, "--dest=" + config.ArgDest, "--progress-interval=1s"}
}

// sampleTeam is the team "default" gets in the dev cluster.
const sampleTeam = "ml-platform"

// labelDefaultNamespace gives "default" its team and, with the real
// node, the label that makes its serving Pods prefer the real node (with
// host networking): the samples' loaders and engines run there in real
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

// printUsage prints the nodes and how to use the cluster, and returns the
// kubectl command line it tells the user to use.
func printUsage(root, kubeconfig string, took time.Duration, nodes, logDir string) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(root, p); err == nil {
			return r
		}
		return p
	}
	kc := rel(kubeconfig)
	kubectl := os.Getenv("KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	k := kubectl + " --kubeconfig " + kc
	fmt.Printf(`
modelgate is running in a simulated GPU cluster (ready in %s): a real
kube-apiserver, controller-manager and scheduler, and kwok playing the
kubelets of these fake nodes (config/dev/nodes.yaml):

%s
  export KUBECONFIG=%s
  %s apply -f config/samples/
  %s get pods -o wide -L modelgate.io/owner,modelgate.io/team
  %s get deploy llm-server -o yaml
  %s get aiinferences -o wide
  %s get aiinferences.v1alpha1.serving.modelgate.io llama-sglang -o yaml
  %s apply -k config/samples/policies
  %s get workloadpolicies
  %s get validatingadmissionpolicies,validatingadmissionpolicybindings
  %s get policyreports -A

Pods are scheduled for real (GPU counts, products, memory, taints); on
kwok's nodes kwok marks them Running (a Job's pods then Succeeded) and no
container runs.
Where each pod lands is printed below as it happens. The samples include an
AIInference in each of v1alpha1, v1beta1 and v1, all stored as v1; read any
of them in any version. modelgate's controller makes each a Deployment and a
Service, which its webhook decorates; their status shows Pending, Loading,
Ready or Failed, and why.
The namespace "default" is labelled modelgate.io/team=%s. With the sample
policies applied, the samples' Job and Pod are denied (model bucket, GPU
product): delete and re-apply them to see the answers. The audit judges
what already runs 15s after a policy change: the PolicyReports and the
policies' Failing column show what the sample policies find in the
samples already applied.
The backstop is on (policy.backstop): each sample policy's CEL form is a
ValidatingAdmissionPolicy (modelgate-<policy>) that the API server enforces
itself, so with modelgate stopped or hung (kill -STOP it) a workload that
breaks one is still refused; injection and modelgate's own checks then
fail open, and the audit reports what was admitted uninjected.
Component logs: %s. Press Ctrl-C to stop everything.

`, took.Round(100*time.Millisecond), indent(nodes), kc, k, k, k, k, k, k, k, k, k, sampleTeam, rel(logDir))
	return k
}

// printRealNode says whether the real node runs, and if not, why; when
// it runs, where the samples land and how to watch their loaders.
func printRealNode(c *cluster.Cluster, k string) {
	switch {
	case c.RealNode != nil:
		fmt.Printf(`The real node %s runs Pods in real containers (kubelet, containerd, runc;
host networking; %d GPUs from a device plugin; images from the registry on
%s, a stand-in engine for vLLM's, SGLang's and TGI's). In "default", the
Pods that name a serving engine (the sample Deployment's and the
AIInferences') prefer it: there the loader really downloads the samples'
model, hf://%s or s3://%s/%s (%d MiB, from a Hub
and an S3 store on loopback that the Configuration's injection.loader.env
points the loaders at), and the engine serves it:

  %s get pods -o wide -w    # Init:0/1, PodInitializing, Running, then READY 1/1
  %s logs deploy/llm-server -c model-loader

Pods it cannot fit (GPUs, CPU, memory, a port already taken on the host)
go to kwok's nodes, as do the Job and the notebook (no stand-in runs
their images). Pods in a namespace labelled %s=true
all run there. Its logs: %s/kubelet.log and containerd.log.

`, c.RealNode.Name, c.RealNode.GPUs, c.RealNode.Registry, sampleHFRepo, sampleS3Bucket, sampleS3Prefix,
			sampleModelSize()>>20, k, k, cluster.RealNodeNamespaceLabel, c.LogDir)
	case c.RealNodeSkipped != "":
		fmt.Printf("No real node (kwok's nodes only): %s.\n\n", c.RealNodeSkipped)
	}
}

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("  " + line)
	}
	return b.String()
}
