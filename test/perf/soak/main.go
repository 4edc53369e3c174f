// Command soak is `make soak`: it measures bin/modelgate serving real
// traffic for a long time, against a real kube-apiserver and etcd
// (envtest's, from bin/k8s), and prints a report of the figures:
//
//  1. mixed load (mutating, validating with the policy library loaded,
//     AIInference conversion) straight to one replica's webhook port at the
//     highest rate it sustains with GOMAXPROCS=1, for --duration: rate,
//     errors, latency, RSS growth and goroutines;
//  2. a rolling restart of two replicas behind a readiness-aware balancer,
//     the API server calling them while a client writes opted-in objects:
//     failed writes, with a timeline;
//  3. attacks replayed against a running replica: made-up kinds, huge
//     UPDATEs, oversize bodies, slow connections and a forged record: the
//     answers, RSS and whether it still answers in time.
//
// It measures and reports; it asserts nothing (the exit status is 0 unless
// the run itself failed). docs/operations.md, "Soak figures", says how to
// read the report.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// options are the command's flags.
type options struct {
	modelgate   string
	duration    time.Duration
	warmup      time.Duration
	rampStep    time.Duration
	maxWorkers  int
	sampleEvery time.Duration
	probePeriod time.Duration
	settle      time.Duration
	writers     int
	phases      string
	out         string
}

func main() {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.modelgate, "modelgate", "", "the modelgate binary to run (required; make build writes bin/modelgate)")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long to hold the mixed load")
	fs.DurationVar(&o.warmup, "warmup", 30*time.Second, "load at the held concurrency before the start sample")
	fs.DurationVar(&o.rampStep, "ramp-step", 5*time.Second, "how long each concurrency of the ramp runs")
	fs.IntVar(&o.maxWorkers, "max-workers", 64, "the ramp's highest concurrency")
	fs.DurationVar(&o.sampleEvery, "sample-every", 10*time.Second, "how often the hold samples RSS and goroutines")
	fs.DurationVar(&o.probePeriod, "probe-period", time.Second, "how often the balancer asks each replica's /readyz")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "load before the first stop, and after each replica is back in rotation")
	fs.IntVar(&o.writers, "writers", 4, "API server clients writing during the rolling restart")
	fs.StringVar(&o.phases, "phases", "load,restart,attacks", "the phases to run, comma-separated")
	fs.StringVar(&o.out, "out", "", "also write the report to this file")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.modelgate == "":
		return errors.New("--modelgate is required (make build writes bin/modelgate)")
	case o.duration <= 0 || o.warmup < 0 || o.rampStep <= 0 || o.sampleEvery <= 0 || o.probePeriod <= 0:
		return errors.New("--duration, --ramp-step, --sample-every and --probe-period must be positive, --warmup not negative")
	case o.maxWorkers < 1 || o.writers < 1:
		return errors.New("--max-workers and --writers must be at least 1")
	}
	for p := range strings.SplitSeq(o.phases, ",") {
		if p != "load" && p != "restart" && p != "attacks" {
			return fmt.Errorf("--phases: unknown phase %q (load, restart, attacks)", p)
		}
	}
	if st, err := os.Stat(o.modelgate); err != nil || st.IsDir() {
		return fmt.Errorf("--modelgate %s: not a file (run make build)", o.modelgate)
	}
	return nil
}

func (o options) has(phase string) bool {
	for p := range strings.SplitSeq(o.phases, ",") {
		if p == phase {
			return true
		}
	}
	return false
}

// run starts the control plane and the replicas, runs the phases and
// writes the report; what a failed phase leaves is reported with its error.
func run(o options) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	info := runInfo{started: time.Now(), cpus: runtime.NumCPU(), load: loadAverage(),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, kubernetes: env.KubernetesVersion}
	root, err := env.RepoRoot()
	if err != nil {
		return err
	}
	if info.modelgate, err = filepath.Abs(o.modelgate); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return fmt.Errorf("creating the run's folder: %w", err)
	}
	progress("starting etcd and kube-apiserver (%s)", dir)
	cp, err := startControlPlane(ctx, root, dir)
	if err != nil {
		return fmt.Errorf("%w\nlogs in %s", err, dir)
	}
	defer func() {
		if stopErr := cp.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	var replicas []*replica
	for _, name := range []string{"replica-a", "replica-b"} {
		r, err := newReplica(name, info.modelgate, dir, cp)
		if err != nil {
			return err
		}
		replicas = append(replicas, r)
	}
	defer func() {
		for _, r := range replicas {
			if r.cmd != nil {
				_, _ = r.terminate()
			}
		}
	}()
	tl := &timeline{start: time.Now(), echo: func(f string, a ...any) { progress("restart: "+f, a...) }}
	lb, err := newBalancer(cp.balancerAddr, o.probePeriod, tl, replicas...)
	if err != nil {
		return err
	}
	lbCtx, stopLB := context.WithCancel(ctx)
	defer stopLB()
	go lb.run(lbCtx)

	a := replicas[0]
	if err := bringUp(ctx, a, lb); err != nil {
		return err
	}
	scr := newScraper(cp.metricsToken)
	if err := cp.installPolicies(ctx, root); err != nil {
		return err
	}
	if err := waitPolicies(ctx, scr, a, cp.policies); err != nil {
		return err
	}
	progress("%s ready with the %d WorkloadPolicies of the library loaded", a.name, cp.policies)

	var (
		load     *loadResult
		restarts []*restartResult
		att      *attackResult
		errs     []string
	)
	fail := func(phase string, err error) { errs = append(errs, fmt.Sprintf("%s: %v", phase, err)) }
	if o.has("load") {
		progress("1. mixed load: ramp, warm-up %s, hold %s", o.warmup, o.duration)
		if load, err = loadPhase(ctx, o, cp, a, scr, progress); err != nil {
			fail("mixed load", err)
		}
	}
	if o.has("restart") && ctx.Err() == nil {
		progress("2. rolling restart")
		b := replicas[1]
		if err := b.start(); err != nil {
			return err
		}
		if err := b.waitReady(ctx, 60*time.Second); err != nil {
			return err
		}
		// First with drainPeriod 0, the baseline (a replica that stops
		// at once, as before modelgate drained), then with the default.
	periods:
		for _, drain := range []time.Duration{0, config.DefaultDrainPeriod} {
			if err := withDrainPeriod(ctx, replicas, lb, drain, progress); err != nil {
				fail("rolling restart", err)
				break
			}
			for _, m := range []restartMode{
				{name: "SIGTERM alone: the replica leaves rotation only when its /readyz fails"},
				{name: "as Kubernetes deletes a Pod: out of the endpoints and SIGTERM at once", deleted: true},
			} {
				r, err := rollingRestart(ctx, cp, lb, replicas, m, o.writers, o.settle, progress)
				if err != nil {
					fail("rolling restart", err)
					break periods
				}
				r.drainPeriod = drain
				restarts = append(restarts, r)
			}
		}
	}
	if o.has("attacks") && ctx.Err() == nil {
		progress("3. attack replay")
		normal, err := normalReview(ctx, cp, a)
		if err == nil {
			att, err = attackPhase(ctx, cp, a, scr, normal, progress)
		}
		if err != nil {
			fail("attack replay", err)
		}
	}
	if ctx.Err() != nil {
		fail("run", errors.New("interrupted"))
	}
	var buf bytes.Buffer
	writeReport(&buf, info, load, restarts, att, errs)
	fmt.Fprintf(os.Stdout, "\n%s", buf.Bytes())
	if o.out != "" {
		if err := os.WriteFile(filepath.Clean(o.out), buf.Bytes(), 0o600); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		progress("report written to %s; logs in %s", o.out, dir)
	}
	return nil
}

// withDrainPeriod restarts every replica, one after the other and without
// traffic, with drainPeriod d.
func withDrainPeriod(ctx context.Context, replicas []*replica, lb *balancer, d time.Duration, progress func(string, ...any)) error {
	progress("restarting the replicas with drainPeriod %s", d)
	for _, r := range replicas {
		if err := r.setDrainPeriod(d); err != nil {
			return err
		}
		if _, err := r.terminate(); err != nil {
			return err
		}
		lb.replaced(r)
		if err := bringUp(ctx, r, lb); err != nil {
			return err
		}
	}
	return nil
}

// bringUp starts a replica and waits until it is ready and the balancer
// routes to it.
func bringUp(ctx context.Context, r *replica, lb *balancer) error {
	if err := r.start(); err != nil {
		return err
	}
	if err := r.waitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	for !lb.inRotation(r) && ctx.Err() == nil {
		sleep(ctx, 20*time.Millisecond)
	}
	return nil
}

// normalReview is the mix's opted-in Deployment CREATE, built against the
// replica.
func normalReview(ctx context.Context, cp *controlPlane, r *replica) (review, error) {
	c, err := newHTTPSClient(cp.caData, 4)
	if err != nil {
		return review{}, err
	}
	mix, err := buildMix(ctx, func(ctx context.Context, path string, body []byte) (int, []byte, error) {
		return post(ctx, c, "https://"+r.webhookAddr+path, body)
	})
	if err != nil {
		return review{}, err
	}
	return mix[0], nil
}

// waitPolicies waits until the replica has compiled and loaded n policies
// (modelgate_policies_loaded).
func waitPolicies(ctx context.Context, scr *scraper, r *replica, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		text, err := scr.scrape(ctx, r)
		if err == nil {
			if v, gerr := gauge(text, "modelgate_policies_loaded"); gerr == nil && int(v) == n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s did not load %d policies within 60s (last scrape: %w)", r.name, n, err)
			}
			return fmt.Errorf("%s did not load %d policies within 60s (the last scrape succeeded)", r.name, n)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
