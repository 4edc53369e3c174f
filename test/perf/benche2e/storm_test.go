package main

import (
	"strings"
	"testing"
	"time"
)

// TestWriteStorm checks the storm's table: a column per phase, the cache
// off and on phases pooled, on ÷ off, and the CPU per review from the
// process CPU and the review counters.
func TestWriteStorm(t *testing.T) {
	names := []string{"workload.validate.modelgate.io"}
	calls := hist(0.2, 0.005, 10, 0.025, 20, inf, 20)
	h := func() []histogram { return []histogram{calls, calls, hist(0.5, 0.001, 100, inf, 100)} }
	var results []stormResult
	for _, p := range stormSchedule(2) {
		r := stormResult{stormPhase: p, created: 4 * time.Second, restarted: 6 * time.Second,
			delta: delta{hists: h(), counters: []float64{2.5, 150, 50, 0, 0}}, elapsed: 10 * time.Second, idleCPU: 0.05}
		if p.cache {
			r.created = 2 * time.Second
			r.delta.counters = []float64{1.5, 150, 50, 140, 10}
		}
		results = append(results, r)
	}
	var b strings.Builder
	if err := writeStorm(&b, runInfo{pods: 100, replicas: 25}, names, results); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	row := func(prefix string) string { return tableRow(t, out, prefix) }
	for prefix, want := range map[string]string{
		"metric":                             "r1 cache off | r1 cache on | r2 cache off | r2 cache on | cache off (all) | cache on (all) | on ÷ off",
		"all pods Running after the creates": "4.00 s | 2.00 s | 4.00 s | 2.00 s | 4.00 s | 2.00 s | 0.50×",
		"modelgate CPU per admission review": "10.0 ms | 5.00 ms | 10.0 ms | 5.00 ms | 10.0 ms | 5.00 ms | 0.50×",
		"modelgate idle CPU":                 "50.0 ms | 50.0 ms | 50.0 ms | 50.0 ms | 50.0 ms | 50.0 ms | 1.00×",
		"decision cache hits":                "0 | 140 | 0 | 140 | 0 | 280 | n/a",
	} {
		if got := row(prefix); got != want {
			t.Errorf("%s: %q, want %q", prefix, got, want)
		}
	}
	if !strings.Contains(out, "100 pods through Deployments of 25 replicas") || !strings.Contains(out, "2 round(s)") {
		t.Errorf("the storm's header does not describe the run:\n%s", out)
	}
}

// tableRow is the cells after the first of the report table's row that
// starts with prefix, joined by " | ".
func tableRow(t *testing.T, out, prefix string) string {
	t.Helper()
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "| "+prefix) {
			var cells []string
			for c := range strings.SplitSeq(strings.Trim(strings.TrimSpace(line), "|"), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			return strings.Join(cells[1:], " | ")
		}
	}
	t.Fatalf("no row %q in:\n%s", prefix, out)
	return ""
}
