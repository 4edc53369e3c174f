// Command bench-e2e is `make bench-e2e`: in one simulated GPU cluster
// (test/harnesses/cluster) it creates --pods pods through Deployments, without and
// then with modelgate's webhooks registered, --rounds times, and reports
// side by side the time until every pod is Running and the admission
// latency the API server observes (its histograms' deltas over each
// phase), with modelgate's own handler latency as a finer view. It
// measures and reports; it asserts nothing.
//
// Both phases schedule the same pods: the "without" phase creates
// Deployments whose template modelgate already injected (read back from a
// server-side dry run), with modelgate's webhook configurations deleted;
// the "with" phase creates the annotated Deployments and lets modelgate
// inject them.
//
// After the replica storm (storm.go), the backstop measurement
// (backstop.go) compares the API server's admission latency with the
// policies generated from the library's CEL forms bound and unbound.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// options are the command's flags.
type options struct {
	modelgate      string
	pods, replicas int
	rounds         int
	timeout        time.Duration
	out            string
	http2          bool
	stormRounds    int
	backstopRounds int
}

func main() {
	// The clients log nothing the report needs.
	crlog.SetLogger(logr.Discard())
	// A flag set of its own: imported packages register flags (such as
	// --kubeconfig) on the global one that mean nothing here.
	fs := flag.NewFlagSet("bench-e2e", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.modelgate, "modelgate", "", "the modelgate binary to run (required)")
	fs.IntVar(&o.pods, "pods", 500, "pods per phase, 1 GPU each")
	fs.IntVar(&o.replicas, "replicas", 25, "replicas per Deployment")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds of a phase without and a phase with modelgate's webhooks")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "time limit of each phase until every pod is Running, and of each cleanup")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	fs.IntVar(&o.stormRounds, "storm-rounds", 1, "rounds of the replica storm (the policy library in force, --pods pods then a rollout restart, the decision cache off then on); 0 skips it")
	fs.IntVar(&o.backstopRounds, "backstop-rounds", 0, "rounds of the backstop measurement, after the storm (the generated ValidatingAdmissionPolicies unbound then bound, serial creates and a burst of --pods pods); 0 skips it; by default as many as --rounds")
	fs.BoolVar(&o.http2, "http2", false, "serve modelgate's webhooks over HTTP/2 as well (webhook.enableHTTP2; off by default)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if !isSet(fs, "backstop-rounds") {
		o.backstopRounds = o.rounds
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "bench-e2e: %v\n", err)
		fs.Usage()
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bench-e2e: %v\n", err)
		if errors.Is(err, errInterrupted) {
			os.Exit(130)
		}
		os.Exit(1)
	}
}

// validate checks the flags.
func (o options) validate() error {
	switch {
	case o.modelgate == "":
		return errors.New("--modelgate is required: the modelgate binary to run (make build writes bin/modelgate)")
	case o.pods < 1:
		return fmt.Errorf("--pods %d: must be a positive integer", o.pods)
	case o.replicas < 1:
		return fmt.Errorf("--replicas %d: must be a positive integer", o.replicas)
	case o.rounds < 1:
		return fmt.Errorf("--rounds %d: must be a positive integer", o.rounds)
	case o.stormRounds < 0:
		return fmt.Errorf("--storm-rounds %d: must be 0 or more", o.stormRounds)
	case o.backstopRounds < 0:
		return fmt.Errorf("--backstop-rounds %d: must be 0 or more", o.backstopRounds)
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %s: must be positive", o.timeout)
	}
	if st, err := os.Stat(o.modelgate); err != nil || st.IsDir() {
		return fmt.Errorf("--modelgate %s: not a file (run make build)", o.modelgate)
	}
	if o.out != "" {
		if st, err := os.Stat(filepath.Dir(o.out)); err != nil || !st.IsDir() {
			return fmt.Errorf("--out %s: the folder %s does not exist", o.out, filepath.Dir(o.out))
		}
	}
	return nil
}

// run starts the cluster, runs the phases and writes the report. The
// cluster's folder is removed at the end, unless something failed: then
// its logs stay and their folder is printed.
func run(o options) (err error) {
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	root, err := env.RepoRoot()
	if err != nil {
		return err
	}
	modelgate, err := filepath.Abs(o.modelgate)
	if err != nil {
		return fmt.Errorf("--modelgate %s: %w", o.modelgate, err)
	}
	dir, err := os.MkdirTemp("", "bench-e2e-")
	if err != nil {
		return fmt.Errorf("creating the cluster's folder: %w", err)
	}
	defer func() {
		if err != nil && sigCtx.Err() == nil {
			err = fmt.Errorf("%w\nthe cluster's logs are kept in %s", err, filepath.Join(dir, "logs"))
			return
		}
		_ = os.RemoveAll(dir)
	}()
	nodes, nodeCount, gpusPerNode, err := writeNodes(dir, filepath.Join(root, "config", "dev", "nodes.yaml"), o.pods)
	if err != nil {
		return err
	}
	metricsAddr, err := cluster.FreeAddr()
	if err != nil {
		return err
	}
	started := time.Now()
	progressf(os.Stderr, "starting a cluster with %d fake GPU nodes and modelgate (%s)", nodeCount, dir)
	c, err := cluster.Start(sigCtx, cluster.Options{
		Root: root, Dir: dir, Nodes: nodes, Modelgate: modelgate, User: "bench", MetricsAddr: metricsAddr,
		Configure: func(c *config.Configuration) { c.Webhook.EnableHTTP2 = o.http2 },
	})
	if err != nil {
		if sigCtx.Err() != nil {
			return errInterrupted
		}
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		progressf(os.Stderr, "stopping the cluster")
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the cluster: %w", stopErr))
		}
	}()
	progressf(os.Stderr, "cluster ready in %s", time.Since(started).Round(100*time.Millisecond))

	// A component that exits ends the run, with its log's last lines.
	ctx, cancel := context.WithCancelCause(sigCtx)
	defer cancel(nil)
	go func() {
		select {
		case failed := <-c.Failed():
			cancel(failed)
		case <-ctx.Done():
		}
	}()

	b, results, err := measure(ctx, c, root, metricsAddr, o)
	if err != nil {
		return interrupted(sigCtx, ctx, err)
	}
	storms, err := b.storm(ctx, c, root, o.stormRounds)
	if err != nil {
		return interrupted(sigCtx, ctx, fmt.Errorf("replica storm: %w", err))
	}
	if o.stormRounds == 0 && o.backstopRounds > 0 {
		// The storm puts the library in force; without it, this does.
		if err := b.applyLibrary(ctx, c.Admin, root); err != nil {
			return interrupted(sigCtx, ctx, err)
		}
		if err := b.setWebhooks(ctx, true); err != nil {
			return interrupted(sigCtx, ctx, err)
		}
	}
	backstop, err := b.backstop(ctx, c, root, o.backstopRounds)
	if err != nil {
		return interrupted(sigCtx, ctx, fmt.Errorf("backstop: %w", err))
	}
	info := runInfo{
		pods:        o.pods,
		replicas:    o.replicas,
		deployments: len(deploymentSizes(o.pods, o.replicas)),
		nodes:       nodeCount,
		gpusPerNode: gpusPerNode,
		rounds:      o.rounds,
		cpus:        runtime.NumCPU(),
		qps:         cluster.DefaultClientQPS,
		burst:       cluster.DefaultClientBurst,
		goVersion:   runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		kubernetes:  env.KubernetesVersion,
		kwok:        cluster.KwokVersion,
		webhooks:    b.hooks.names,
		started:     started,
	}
	return report(o.out, info, b.hists, b.counters, results, storms, backstopHists(backstop.policies, b.hooks.names), backstop)
}

// measure runs every phase in turn.
func measure(ctx context.Context, c *cluster.Cluster, root, metricsAddr string, o options) (*bench, []result, error) {
	b, err := newBench(ctx, c, root, metricsAddr, o)
	if err != nil {
		return nil, nil, err
	}
	var results []result
	for _, p := range schedule(o.rounds) {
		r, err := b.run(ctx, p)
		if err != nil {
			return nil, nil, fmt.Errorf("phase %q: %w", p.label(), err)
		}
		results = append(results, r)
	}
	return b, results, nil
}

// errInterrupted is returned when Ctrl-C (or SIGTERM) stopped the run.
var errInterrupted = errors.New("interrupted")

// interrupted names Ctrl-C or a failed component as the reason, rather
// than whatever the interrupted call returned.
func interrupted(sigCtx, ctx context.Context, err error) error {
	if sigCtx.Err() != nil {
		return errInterrupted
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w (%w)", cause, err)
	}
	return err
}

// newBench creates the clients, reads modelgate's webhook configurations
// and the template modelgate injects.
func newBench(ctx context.Context, c *cluster.Cluster, root, metricsAddr string, o options) (*bench, error) {
	unthrottled := func(cfg *rest.Config) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS = -1 // the benchmark's own requests must not queue in the client
		return cfg
	}
	admin, err := client.New(unthrottled(c.Admin), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the administrator's client: %w", err)
	}
	dev, err := client.New(unthrottled(c.Developer), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the developer's client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(unthrottled(c.Admin))
	if err != nil {
		return nil, fmt.Errorf("creating the administrator's clientset: %w", err)
	}
	s, err := newScraper(c.Admin, metricsAddr)
	if err != nil {
		return nil, err
	}
	hooks, err := loadWebhooks(ctx, admin, root)
	if err != nil {
		return nil, err
	}
	b := &bench{
		pods: o.pods, replicas: o.replicas, timeout: o.timeout,
		admin: admin, dev: dev, clientset: cs, scraper: s, hooks: hooks,
		hists: histSpecs(hooks.names), counters: counterSpecs(), log: os.Stderr,
	}
	if b.template, err = b.injectedTemplate(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// report writes the report to stdout and, when out is set, to out.
func report(out string, info runInfo, hs, cs []spec, results []result, storms []stormResult, bhs []spec, backstop backstopRun) error {
	var buf bytes.Buffer
	if err := writeReport(&buf, info, hs, cs, results); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := writeStorm(&buf, info, info.webhooks, storms); err != nil {
		return fmt.Errorf("writing the storm's report: %w", err)
	}
	if err := writeBackstop(&buf, info, bhs, backstop); err != nil {
		return fmt.Errorf("writing the backstop's report: %w", err)
	}
	if _, err := fmt.Fprintf(os.Stdout, "\n%s", buf.Bytes()); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if out == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Clean(out), buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// isSet reports whether the command line set the named flag.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// progressf prints a timestamped progress line.
func progressf(w io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(w, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
