package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/webhook"
)

// target is one path of one server.
type target struct {
	name    string // as printed
	profile string // the server's profile file names' prefix
	mode    string // the server mode that serves it
	path    string
	body    func(n uint64) []byte // request n's body
}

// same is a load that sends body every time.
func same(body []byte) func(uint64) []byte { return func(uint64) []byte { return body } }

// bench starts each server in turn, pinned, measures its paths at every
// concurrency, and prints the table.
func bench(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	roots, err := writeCertificate(dir)
	if err != nil {
		return err
	}
	secret := seal.Generate()
	if err := os.WriteFile(filepath.Join(dir, "record-key"), secret, 0o600); err != nil {
		return err
	}
	key, err := seal.New(secret)
	if err != nil {
		return err
	}
	mutate, validate, err := bodies(o.root, key)
	if err != nil {
		return err
	}
	answer, err := mutateAnswer(mutate, key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, answerFile), answer, 0o600); err != nil {
		return err
	}
	targets := []target{
		{name: "floor", profile: "floor", mode: "serve-floor", path: "/", body: same(mutate)},
		{name: "floor answering with /mutate's patch", profile: "floor-answer", mode: "serve-floor-answer", path: "/", body: same(mutate)},
		{name: webhook.MutatePath + " (vLLM Deployment)", profile: "mutate", mode: "serve-modelgate", path: webhook.MutatePath, body: same(mutate)},
	}
	// /validate under the library, the injected Deployment: the same
	// no-op server sent /validate's larger review (what the body's size
	// costs any server), the decision cache off (every review evaluated,
	// the baseline), then on under each share of repeats.
	targets = append(targets, target{name: "floor sent " + webhook.ValidatePath + "'s review", profile: "floor-validate",
		mode: "serve-floor", path: "/", body: same(validate)})
	targets = append(targets, target{name: webhook.ValidatePath + " cache off", profile: "validate-nocache",
		mode: "serve-modelgate-nocache", path: webhook.ValidatePath, body: same(validate)})
	for i, m := range loads {
		b, err := m.bodies(validate)
		if err != nil {
			return err
		}
		targets = append(targets, target{name: webhook.ValidatePath + " cache on, " + m.name,
			profile: fmt.Sprintf("validate-%d", i), mode: "serve-modelgate", path: webhook.ValidatePath, body: b})
	}
	if o.only != nil {
		targets = slices.DeleteFunc(targets, func(t target) bool { return t.name != "floor" && !o.only.MatchString(t.name) })
	}
	fmt.Fprintf(os.Stderr, "bench-http: servers on CPU %q, load on CPU %q, %s per cell after %s of warm-up; %s\n",
		o.serverCPU, o.loadCPU, o.duration, o.warmup, runtime.Version())
	results := map[string]map[int]result{}
	rss := map[string]int64{} // each path's server's peak RSS, after its last cell
	for i, t := range targets {
		// A server per path, so that each path's profile is its own.
		profile := ""
		if o.profileDir != "" {
			profile = filepath.Join(o.profileDir, t.profile)
		}
		logPath := filepath.Join(dir, fmt.Sprintf("server-%d.log", i))
		srv, err := startServer(ctx, t.mode, o.serverCPU, dir, o.root, logPath, profile)
		if err != nil {
			return err
		}
		results[t.name] = map[int]result{}
		for _, c := range o.concurrency {
			hc := client(roots, c)
			r, err := measure(ctx, hc, "https://"+srv.addr+t.path+"?timeout=5s", t.body, c, o.warmup, o.duration)
			hc.CloseIdleConnections()
			if err != nil {
				srv.stop()
				return fmt.Errorf("%s at c=%d: %w (server log: %s)", t.name, c, err, logPath)
			}
			results[t.name][c] = r
			fmt.Fprintf(os.Stderr, "  %-45s c=%-3d %8.0f rps\n", t.name, c, r.rps())
		}
		rss[t.name] = srv.peakRSS()
		srv.stop()
	}
	return report(os.Stdout, targets, o.concurrency, results, rss)
}

// report prints one row per path and concurrency: rps, p50, p99, errors,
// and the ratio of its rps to the floor's at the same concurrency; then
// each path's server's peak RSS over all its cells.
func report(w *os.File, targets []target, conc []int, results map[string]map[int]result, rss map[string]int64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tc\trps\tp50\tp99\terrors\tvs floor\t")
	floor := results[targets[0].name]
	for _, c := range conc {
		for _, t := range targets {
			r := results[t.name][c]
			ratio := r.rps() / floor[c].rps()
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%s\t%d\t%.2f×\t\n", t.name, c, r.rps(), ms(r.quantile(0.50)), ms(r.quantile(0.99)), r.errors, ratio)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range targets {
		peak := "unknown"
		if b := rss[t.name]; b > 0 {
			peak = fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
		}
		fmt.Fprintf(w, "peak RSS of the server of %s: %s\n", t.name, peak)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
