package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// webhookSeries renders one series of the API server's webhook histogram,
// with its real label names and buckets.
func webhookSeries(name, typ string, counts [8]int, sum float64) string {
	bounds := []string{"0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "25"}
	labels := fmt.Sprintf(`name=%q,operation="CREATE",rejected="false",type=%q`, name, typ)
	var b strings.Builder
	for i, le := range bounds {
		fmt.Fprintf(&b, "%s_bucket{%s,le=%q} %d\n", webhookDuration, labels, le, counts[i])
	}
	fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %d\n", webhookDuration, labels, counts[7])
	fmt.Fprintf(&b, "%s_sum{%s} %g\n%s_count{%s} %d\n", webhookDuration, labels, sum, webhookDuration, labels, counts[7])
	return b.String()
}

// requestSeries renders one series of apiserver_request_duration_seconds
// with a reduced set of buckets.
func requestSeries(resource, subresource, dryRun string, counts [3]int) string {
	labels := fmt.Sprintf(`component="apiserver",dry_run=%q,group="",resource=%q,scope="resource",subresource=%q,verb="POST",version="v1"`, dryRun, resource, subresource)
	var b strings.Builder
	for i, le := range []string{"0.05", "0.1", "+Inf"} {
		fmt.Fprintf(&b, "%s_bucket{%s,le=%q} %d\n", requestDuration, labels, le, counts[i])
	}
	fmt.Fprintf(&b, "%s_sum{%s} 1\n%s_count{%s} %d\n", requestDuration, labels, requestDuration, labels, counts[2])
	return b.String()
}

// scrape renders an API server scrape: modelgate's two webhooks, another
// webhook, and pod POSTs (plain, binding, dry run).
func scrape(mutating, validating, other [8]int, pods, bindings, dryRuns [3]int) string {
	return "# TYPE " + webhookDuration + " histogram\n" +
		webhookSeries("annotation.inject.modelgate.io", "admit", mutating, 0.1) +
		webhookSeries("workload.validate.modelgate.io", "validating", validating, 0.1) +
		webhookSeries("sidecar.example.com", "admit", other, 0.1) +
		"# TYPE " + requestDuration + " histogram\n" +
		requestSeries("pods", "", "", pods) +
		requestSeries("pods", "binding", "", bindings) +
		requestSeries("pods", "", "All", dryRuns)
}

// modelgateScrape renders modelgate's reviews counter.
func modelgateScrape(pods, deployments int) string {
	return fmt.Sprintf(`# TYPE %[1]s counter
%[1]s{kind="Pod",operation="CREATE",outcome="unchanged"} %[2]d
%[1]s{kind="Deployment",operation="CREATE",outcome="injected"} %[3]d
`, mutatingReviews, pods, deployments)
}

func mustParse(t *testing.T, text string) families {
	t.Helper()
	f, err := parseFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parseFamilies: %v", err)
	}
	return f
}

func TestDiff(t *testing.T) {
	names := []string{"annotation.inject.modelgate.io", "workload.validate.modelgate.io"}
	all := histSpecs(names)
	byTitle := func(prefix string) []spec {
		var out []spec
		for _, s := range all {
			if strings.HasPrefix(s.title, prefix) {
				out = append(out, s)
			}
		}
		if len(out) != 1 {
			t.Fatalf("%d histSpecs titled %q..., want 1", len(out), prefix)
		}
		return out
	}
	hs := append(append(byTitle("modelgate mutating"), byTitle("modelgate validating")...), byTitle("POST pods")...)
	cs := counterSpecs()[:2]

	before := snapshot{
		fromAPIServer: mustParse(t, scrape(
			[8]int{1, 1, 1, 1, 1, 1, 1, 1}, [8]int{1, 1, 1, 1, 1, 1, 1, 1}, [8]int{5, 5, 5, 5, 5, 5, 5, 5},
			[3]int{2, 3, 3}, [3]int{1, 1, 1}, [3]int{0, 0, 0})),
		fromModelgate: mustParse(t, modelgateScrape(1, 1)),
	}
	after := snapshot{
		fromAPIServer: mustParse(t, scrape(
			// 10 more mutating calls: 4 under 5 ms, 6 in (5 ms, 25 ms].
			[8]int{5, 11, 11, 11, 11, 11, 11, 11},
			// 2 more validating calls, both in (25 ms, 100 ms].
			[8]int{1, 1, 3, 3, 3, 3, 3, 3},
			// The other webhook's calls must not count.
			[8]int{500, 500, 500, 500, 500, 500, 500, 500},
			// 4 more pod POSTs; bindings and dry runs must not count.
			[3]int{4, 7, 7}, [3]int{90, 90, 90}, [3]int{9, 9, 9})),
		fromModelgate: mustParse(t, modelgateScrape(11, 3)),
	}
	d, err := diff(before, after, hs, cs)
	if err != nil {
		t.Fatalf("diff: %v", err)
	}
	counts := []float64{}
	for _, h := range d.hists {
		counts = append(counts, h.count)
	}
	if diff := cmp.Diff([]float64{10, 2, 4}, counts); diff != "" {
		t.Errorf("observations per histogram (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{10, 2}, d.counters); diff != "" {
		t.Errorf("counters (-want +got):\n%s", diff)
	}
	// Mutating: rank 5 of 10, the first bucket holds 4: 5 ms + 20 ms * 1/6.
	if got, want := d.hists[0].quantile(0.5), (estimate{value: 0.005 + 0.02/6, lower: 0.005, upper: 0.025, ok: true}); !cmp.Equal(want, got, cmp.AllowUnexported(estimate{}), approx) {
		t.Errorf("mutating p50 = %+v, want %+v", got, want)
	}
	if got := d.hists[1].quantile(0.99); got.lower != 0.025 || got.upper != 0.1 {
		t.Errorf("validating p99 in (%g, %g], want (0.025, 0.1]", got.lower, got.upper)
	}

	pooled, err := pool([]delta{d, d})
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	if pooled.hists[0].count != 20 || pooled.counters[1] != 4 {
		t.Errorf("pooled two rounds: %g mutating calls and %g Deployment reviews, want 20 and 4", pooled.hists[0].count, pooled.counters[1])
	}
	if d.hists[0].count != 10 {
		t.Errorf("pool changed its input: %g mutating calls, want 10", d.hists[0].count)
	}
}

func TestFamiliesMissingAndWrongType(t *testing.T) {
	f := mustParse(t, modelgateScrape(1, 1))
	h, err := f.histogram(webhookDuration, func(map[string]string) bool { return true })
	if err != nil || !h.empty() {
		t.Errorf("a family not scraped: %+v, %v; want an empty histogram", h, err)
	}
	c, err := f.counter(policyReviews, func(map[string]string) bool { return true })
	if err != nil || c != 0 {
		t.Errorf("a counter not scraped: %g, %v; want 0", c, err)
	}
	if _, err := f.histogram(mutatingReviews, func(map[string]string) bool { return true }); err == nil {
		t.Errorf("reading a counter as a histogram: no error")
	}
	g := mustParse(t, "# TYPE "+webhookDuration+" histogram\n"+webhookSeries("a", "admit", [8]int{1, 1, 1, 1, 1, 1, 1, 1}, 0))
	if _, err := g.counter(webhookDuration, func(map[string]string) bool { return true }); err == nil {
		t.Errorf("reading a histogram as a counter: no error")
	}
}

func TestParseFamiliesError(t *testing.T) {
	if _, err := parseFamilies(strings.NewReader("not a metric line {\n")); err == nil {
		t.Errorf("parseFamilies of garbage: no error")
	}
}
