// Command bench-http (make bench-http) measures modelgate's admission HTTP
// path against a floor: modelgate's workload webhooks (/mutate, /validate
// with the policy library), served as `modelgate serve` wires them (TLS,
// request limits, handlers, metrics, logging), and a no-op TLS server that
// decodes each AdmissionReview and answers allowed; a second no-op server
// answers with /mutate's own answer (its patch), the ceiling of /mutate
// whatever its handler costs. Each server runs alone
// on one core (taskset), the load generator on another, sending requests
// as kube-apiserver does: HTTPS, HTTP/1.1 keep-alive, one connection per
// request in flight. It prints requests per second, p50 and p99 per path
// and concurrency, and each path's ratio to the floor measured in the same
// run (docs/performance.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "serve-modelgate":
			exit(serveModelgate(os.Args[2:], true))
		case "serve-modelgate-nocache":
			exit(serveModelgate(os.Args[2:], false))
		case "serve-floor":
			exit(serveFloor(os.Args[2:], false))
		case "serve-floor-answer":
			exit(serveFloor(os.Args[2:], true))
		}
	}
	exit(run(os.Args[1:]))
}

func exit(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-http: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// options are the benchmark's flags.
type options struct {
	duration    time.Duration
	warmup      time.Duration
	concurrency []int
	serverCPU   string
	loadCPU     string
	root        string
	profileDir  string
	only        *regexp.Regexp
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench-http", flag.ContinueOnError)
	var o options
	var conc string
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "how long each cell (server, path, concurrency) is measured")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "load sent before each cell's measurement and not counted")
	fs.StringVar(&conc, "concurrency", "1,2,8", "requests in flight (connections), comma-separated")
	fs.StringVar(&o.serverCPU, "server-cpu", "0", "the CPU the servers are pinned to (taskset -c); empty: not pinned")
	fs.StringVar(&o.loadCPU, "load-cpu", "1", "the CPU the load generator is pinned to; empty: not pinned")
	fs.StringVar(&o.root, "root", ".", "the repository root (for config/samples/policies)")
	only := fs.String("only", "", "measure only the paths whose names match this regular expression (and the floor), e.g. 'first reviews'")
	fs.StringVar(&o.profileDir, "profile", "", "a directory for each server's CPU and allocation profiles (floor, floor-answer, mutate, validate .cpu.pprof and .allocs.pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return fmt.Errorf("--only: %w", err)
		}
		o.only = re
	}
	if o.profileDir != "" {
		// The servers write into it when they stop; one that cannot
		// would fail to start with nothing in the log to say why.
		if err := os.MkdirAll(o.profileDir, 0o750); err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
	}
	for _, s := range strings.Split(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--concurrency: %q is not a positive integer", s)
		}
		o.concurrency = append(o.concurrency, n)
	}
	if runtime.NumCPU() < 2 && os.Getenv("BENCH_HTTP_PINNED") == "" {
		fmt.Fprintln(os.Stderr, "bench-http: one CPU: nothing is pinned, the load and the server share it")
		o.serverCPU, o.loadCPU = "", ""
	}
	if err := pinSelf(o.loadCPU); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench(ctx, o)
}
