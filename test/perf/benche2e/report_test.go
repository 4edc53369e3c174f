package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestFormatEstimate(t *testing.T) {
	for name, tc := range map[string]struct {
		e    estimate
		want string
	}{
		"interpolated, with its bucket":   {estimate{value: 0.0123, lower: 0.005, upper: 0.025, ok: true}, "12.3 ms (5 ms, 25 ms]"},
		"first bucket":                    {estimate{value: 0.00042, lower: 0, upper: 0.001, ok: true}, "420 µs (0, 1 ms]"},
		"seconds":                         {estimate{value: 1.75, lower: 1, upper: 2.5, ok: true}, "1.75 s (1 s, 2.5 s]"},
		"the +Inf bucket":                 {estimate{value: 25, lower: 25, upper: math.Inf(1), ok: true}, "> 25 s"},
		"a first bucket at or below 0":    {estimate{value: 0, lower: math.Inf(-1), upper: 0, ok: true}, "≤ 0"},
		"no observations":                 {estimate{}, notAvailable},
		"controller-runtime's tiny bound": {estimate{value: 5e-9, lower: 0, upper: 1e-8, ok: true}, "5.00 ns (0, 10 ns]"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := formatEstimate(tc.e); got != tc.want {
				t.Errorf("formatEstimate(%+v) = %q, want %q", tc.e, got, tc.want)
			}
		})
	}
}

func TestFormatChange(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b float64
		want string
	}{
		"slower":      {a: 0.5, b: 0.75, want: "+250 ms (+50%)"},
		"faster":      {a: 2, b: 1, want: "-1.00 s (-50%)"},
		"no baseline": {a: 0, b: 1, want: "+1.00 s"},
		"NaN":         {a: math.NaN(), b: 1, want: notAvailable},
	} {
		t.Run(name, func(t *testing.T) {
			if got := formatChange(tc.a, tc.b, formatSeconds); got != tc.want {
				t.Errorf("formatChange(%g, %g) = %q, want %q", tc.a, tc.b, got, tc.want)
			}
		})
	}
	if got := formatCountChange(66, 60); got != "-6" {
		t.Errorf("formatCountChange(66, 60) = %q, want -6", got)
	}
}

// TestWriteReport checks the table's shape: a column per phase and the
// summaries, times averaged and histograms pooled over the rounds.
func TestWriteReport(t *testing.T) {
	hs := histSpecs([]string{"annotation.inject.modelgate.io"})[:1]
	cs := counterSpecs()[:1]
	calls := hist(0.2, 0.005, 10, 0.025, 20, inf, 20)
	var results []result
	for _, p := range schedule(2) {
		r := result{phase: p, creates: time.Second, times: [milestones]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}}
		r.delta = delta{hists: []histogram{{}}, counters: []float64{0}}
		if p.webhooks {
			r.times[running] = time.Duration(p.round) * 5 * time.Second // 5 s and 10 s: mean 7.5 s
			r.delta = delta{hists: []histogram{calls}, counters: []float64{20}}
		}
		results = append(results, r)
	}
	var b strings.Builder
	info := runInfo{pods: 100, replicas: 25, deployments: 4, nodes: 15, rounds: 2, cpus: 2, qps: 100, burst: 200, goVersion: "go", webhooks: []string{"annotation.inject.modelgate.io"}}
	if err := writeReport(&b, info, hs, cs, results); err != nil {
		t.Fatalf("writeReport: %v", err)
	}
	out := b.String()
	row := func(prefix string) []string {
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, "| "+prefix+" ") {
				var cells []string
				for c := range strings.SplitSeq(strings.Trim(strings.TrimSpace(line), "|"), "|") {
					cells = append(cells, strings.TrimSpace(c))
				}
				return cells[1:]
			}
		}
		t.Fatalf("no row %q in:\n%s", prefix, out)
		return nil
	}
	if got, want := strings.Join(row("metric"), " | "), "r1 without | r1 with | r2 without | r2 with | without (all) | with (all) | with - without"; got != want {
		t.Errorf("columns: %q, want %q", got, want)
	}
	for _, want := range []string{"100 pods per phase", "4 Deployments of up to 25 replicas", "15 fake nodes", "QPS/burst: 100/200", "CPUs: 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if got, want := strings.Join(row("all pods Running"), " | "), "4.00 s | 5.00 s | 4.00 s | 10.0 s | 4.00 s | 7.50 s | +3.50 s (+88%)"; got != want {
		t.Errorf("Running row: %q, want %q", got, want)
	}
	if got, want := strings.Join(row(hs[0].title+": observations"), " | "), "0 | 20 | 0 | 20 | 0 | 40 | +40"; got != want {
		t.Errorf("observations row: %q, want %q", got, want)
	}
	if got, want := row(hs[0].title + ": p50")[5], "5.00 ms (0, 5 ms]"; got != want {
		t.Errorf("pooled p50: %q, want %q", got, want)
	}
	if !strings.Contains(out, "- "+webhookDuration+" (kube-apiserver): 5 ms, 25 ms, +Inf") {
		t.Errorf("report lacks the scraped bucket bounds:\n%s", out)
	}
}

func TestSampleQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	samples := ms(5, 1, 4, 2, 3, 10, 9, 8, 7, 6) // 1..10, unsorted
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Millisecond}, {0.9, 9 * time.Millisecond}, {0.99, 10 * time.Millisecond}, {0.01, time.Millisecond}, {1, 10 * time.Millisecond}} {
		if got := sampleQuantile(samples, c.q); got != c.want {
			t.Errorf("p%g of 1..10 ms: got %s, want %s", c.q*100, got, c.want)
		}
	}
	if got := sampleQuantile(nil, 0.5); got != 0 {
		t.Errorf("p50 of nothing: got %s, want 0", got)
	}
	if samples[0] != 5*time.Millisecond {
		t.Errorf("sampleQuantile sorted its argument in place: %v", samples)
	}
}
