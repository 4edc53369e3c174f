package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// runInfo describes the run for the report's header.
type runInfo struct {
	started    time.Time
	cpus       int
	load       string
	goVersion  string
	kubernetes string
	modelgate  string
}

// writeReport writes every figure the run produced; a nil result is a
// phase that did not run.
func writeReport(w io.Writer, info runInfo, load *loadResult, restarts []*restartResult, att *attackResult, errs []string) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("modelgate soak report (make soak)")
	p("run: %s, %d CPUs shared with other work (load average at start: %s), %s, kube-apiserver and etcd %s",
		info.started.Format(time.RFC3339), info.cpus, info.load, info.goVersion, info.kubernetes)
	p("replicas: %s serve, each with GOMAXPROCS=1 and MODELGATE_MEMORY_LIMIT=256Mi (GOMEMLIMIT 230Mi), config/rbac's permissions;", info.modelgate)
	p("metrics read over HTTPS (metrics.secure, the default) with a TokenRequest token of ServiceAccount %s, bound to modelgate-metrics-reader", scraperAccount)
	if load != nil {
		p("")
		writeLoad(p, load)
	}
	if len(restarts) > 0 {
		p("")
		writeRestarts(p, restarts)
	}
	if att != nil {
		p("")
		writeAttacks(p, att)
	}
	if len(errs) > 0 {
		p("")
		p("RUN ERRORS")
		for _, e := range errs {
			p("  %s", e)
		}
	}
}

func writeLoad(p func(string, ...any), l *loadResult) {
	p("1. MIXED LOAD, straight to one replica's webhook port over TLS (HTTP/1.1, kept-alive connections, the webhooks' CA)")
	p("   policies loaded (modelgate_policies_loaded): %g", l.policies)
	p("   mix (share of requests, and how many the hold sent):")
	total := 0
	for _, r := range l.mix {
		total += r.weight
	}
	for i, r := range l.mix {
		n := 0
		if l.hold != nil {
			n = l.hold.perReview[i]
		}
		p("     %3d%%  %-38s %9d", r.weight*100/total, r.name, n)
	}
	p("   ramp (closed loop, each level %s):", stepLength(l.ramp))
	p("     workers  reviews/s        p50        p99  failed")
	for _, s := range l.ramp {
		p("     %7d  %9.0f  %9s  %9s  %6d", s.concurrency, s.rate(), dur(s.quantile(0.5)), dur(s.quantile(0.99)), s.failures.total)
	}
	p("   held: %d workers, the last level before degradation: %s", l.workers, l.why)
	if l.hold == nil {
		return
	}
	h := l.hold
	p("   hold: %s after a %s warm-up at the same concurrency", h.elapsed.Round(time.Second), l.warmup)
	p("     requests     %d", len(h.latencies))
	p("     rate         %.0f reviews/s", h.rate())
	p("     errors       %d (target 0)%s", h.failures.total, failureLines(h.failures, "       "))
	p("     latency      p50 %s, p90 %s, p99 %s, p99.9 %s, max %s", dur(h.quantile(0.5)), dur(h.quantile(0.9)),
		dur(h.quantile(0.99)), dur(h.quantile(0.999)), dur(h.quantile(1)))
	if len(l.samples) < 2 {
		return
	}
	start, end := l.samples[0], l.samples[len(l.samples)-1]
	lo, hi := start.rss, start.rss
	for _, s := range l.samples {
		lo, hi = min(lo, s.rss), max(hi, s.rss)
	}
	growth := 100 * float64(end.rss-start.rss) / float64(start.rss)
	p("     RSS          start %s (after warm-up), end %s: growth %+.1f%% (target < 10%%); min %s, max %s over %d samples",
		mib(start.rss), mib(end.rss), growth, mib(lo), mib(hi), len(l.samples))
	p("     goroutines   start %g, end %g (go_goroutines; target flat)", start.goroutines, end.goroutines)
	p("     heap in use  start %s, end %s (go_memstats_heap_inuse_bytes)", mib(int64(start.heapInuse)), mib(int64(end.heapInuse)))
	p("   samples (every %s):", sampleStep(l.samples))
	for _, s := range l.samples {
		p("     %7.0fs  RSS %9s  goroutines %4g  heap in use %9s", s.at.Sub(start.at).Seconds(), mib(s.rss), s.goroutines, mib(int64(s.heapInuse)))
	}
}

func writeRestarts(p func(string, ...any), rs []*restartResult) {
	p("2. ROLLING RESTART of two replicas under load through the API server")
	p("   the webhook configurations (config/webhook) and the CRD's conversion webhook point at an in-harness TCP balancer,")
	p("   which routes new connections only to replicas whose /readyz answered 200 at its last probe (every second) and")
	p("   never retries a refused connection, as kube-proxy does not")
	for _, r := range rs {
		failed := r.failures.total
		p("   mode: %s; drainPeriod %s%s", r.mode.name, r.drainPeriod, map[bool]string{true: " (the baseline: no drain)", false: ""}[r.drainPeriod == 0])
		p("     writes       %d in %s, %d failed (target 0)", r.total(), r.elapsed.Round(time.Second), failed)
		names := make([]string, 0, len(r.ops))
		for n := range r.ops {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p("       %-30s %6d  failed %d", n, r.ops[n].total, r.ops[n].failed)
		}
		if failed > 0 {
			p("     failures by cause:%s", failureLines(&r.failures, "       "))
		}
		p("     exits after SIGTERM: %s", strings.Join(r.exits, ", "))
		p("     balancer: %s", r.lb)
		p("     timeline:")
		for _, e := range r.events {
			p("       %s", e)
		}
	}
}

func writeAttacks(p func(string, ...any), a *attackResult) {
	p("3. ATTACK REPLAY against a running replica's webhook port")
	p("   RSS before %s, peak %s, after %s (15s after the last attack)", mib(a.before.rss), mib(a.peak), mib(a.after.rss))
	p("   goroutines before %g, peak %g (slow connections open), after %g", a.before.goroutines, a.goroutinesPeak, a.after.goroutines)
	for i, at := range a.attacks {
		p("   %s", at.name)
		p("     answers: %s; RSS peak %s", codesString(at.codes), mib(a.peaks[i]))
		if at.note != "" {
			p("     %s", at.note)
		}
	}
	p("   normal reviews during the slow attacks (one every 250ms, 5s timeout):")
	for _, s := range a.probes {
		p("     %s", s)
	}
	p("   metric labels: %g reviews counted as kind=\"other\"; longest metrics line %d bytes", a.otherKinds, a.longestMetric)
	p("   forged record (owns limits/server/memory=1Gi, requests/server/cpu=500m, nodeAffinity/In/tenant.example.com/pool):")
	for _, f := range a.forged {
		p("     %s", f)
	}
	p("   afterwards: server up=%t; %s", a.alive, a.normalAfter)
}

// failureLines lists failures by cause, then the first few in full.
func failureLines(f *failures, indent string) string {
	if f.total == 0 {
		return ""
	}
	var b strings.Builder
	causes := make([]string, 0, len(f.byCause))
	for c := range f.byCause {
		causes = append(causes, c)
	}
	sort.Slice(causes, func(i, j int) bool { return f.byCause[causes[i]] > f.byCause[causes[j]] })
	for _, c := range causes {
		fmt.Fprintf(&b, "\n%s%5d  %s", indent, f.byCause[c], c)
	}
	fmt.Fprintf(&b, "\n%sfirst:", indent)
	for _, s := range f.first {
		fmt.Fprintf(&b, "\n%s  %s", indent, s)
	}
	return b.String()
}

func stepLength(steps []*step) string {
	if len(steps) == 0 {
		return "-"
	}
	return steps[0].elapsed.Round(100 * time.Millisecond).String()
}

func sampleStep(s []sample) string {
	if len(s) < 2 {
		return "-"
	}
	return s[1].at.Sub(s[0].at).Round(time.Second).String()
}

// dur formats a latency.
func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
