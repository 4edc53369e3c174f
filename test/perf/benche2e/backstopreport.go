package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// poolBackstop pools the phases of one setting: serial samples together,
// burst times averaged, histogram deltas added.
func poolBackstop(results []backstopResult, bound bool) (backstopResult, error) {
	out := backstopResult{backstopPhase: backstopPhase{bound: bound}}
	var serial, burst []delta
	for _, r := range results {
		if r.bound != bound {
			continue
		}
		out.pods = append(out.pods, r.pods...)
		out.deployments = append(out.deployments, r.deployments...)
		out.creates += r.creates
		out.running += r.running
		serial = append(serial, r.serial)
		burst = append(burst, r.burst)
	}
	if len(serial) == 0 {
		return out, nil
	}
	n := time.Duration(len(serial))
	out.creates /= n
	out.running /= n
	var err error
	if out.serial, err = pool(serial); err != nil {
		return out, err
	}
	out.burst, err = pool(burst)
	return out, err
}

// sampleMean is the samples' mean, in seconds; NaN without samples.
func sampleMean(samples []time.Duration) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return (sum / time.Duration(len(samples))).Seconds()
}

// mean is a histogram's exact mean (its sum over its count); NaN without
// observations.
func (h histogram) mean() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.sum / h.count
}

// ratio shows b ÷ a; n/a without a positive baseline.
func ratio(a, b float64) string {
	if !(a > 0) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return notAvailable
	}
	return fmt.Sprintf("%.2f×", b/a)
}

// writeBackstop writes the backstop's table: a column per phase, the
// unbound and bound phases pooled, and bound ÷ unbound, then a reading.
func writeBackstop(w io.Writer, info runInfo, hs []spec, run backstopRun) error {
	if len(run.results) == 0 {
		return nil
	}
	unbound, err := poolBackstop(run.results, false)
	if err != nil {
		return fmt.Errorf("pooling the unbound phases: %w", err)
	}
	bound, err := poolBackstop(run.results, true)
	if err != nil {
		return fmt.Errorf("pooling the bound phases: %w", err)
	}
	cols := append(append([]backstopResult{}, run.results...), unbound, bound)
	t := &table{header: []string{"metric"}}
	for _, r := range run.results {
		t.header = append(t.header, r.label())
	}
	t.header = append(t.header, "unbound (all)", "bound (all)", "bound ÷ unbound")
	row := func(title string, v func(backstopResult) float64, format func(float64) string) {
		cells := []string{title}
		for _, r := range cols {
			cells = append(cells, format(v(r)))
		}
		t.add(append(cells, ratio(v(unbound), v(bound)))...)
	}
	estimateRow := func(title string, h func(backstopResult) histogram, q float64) {
		cells := []string{fmt.Sprintf("%s: p%g", title, q*100)}
		for _, r := range cols {
			cells = append(cells, formatEstimate(h(r).quantile(q)))
		}
		a, b := h(unbound).quantile(q), h(bound).quantile(q)
		change := notAvailable
		if a.ok && b.ok {
			change = ratio(a.value, b.value)
		}
		t.add(append(cells, change)...)
	}
	samples := func(title string, s func(backstopResult) []time.Duration) {
		for _, q := range []float64{0.5, 0.95, 0.99} {
			row(fmt.Sprintf("%s: p%g", title, q*100), func(r backstopResult) float64 { return sampleQuantile(s(r), q).Seconds() }, formatSeconds)
		}
		row(title+": mean", func(r backstopResult) float64 { return sampleMean(s(r)) }, formatSeconds)
	}
	// hist adds a histogram's rows: what is one of "count", "mean", "p99".
	hist := func(part string, d func(backstopResult) delta, i int, what ...string) {
		h := func(r backstopResult) histogram { return d(r).hists[i] }
		title := part + ": " + hs[i].title
		for _, x := range what {
			switch x {
			case "count":
				row(title+": observations", func(r backstopResult) float64 { return h(r).count }, formatCount)
			case "mean":
				row(title+": mean", func(r backstopResult) float64 { return h(r).mean() }, formatSeconds)
			case "p99":
				estimateRow(title, h, 0.99)
			}
		}
	}
	serial := func(r backstopResult) delta { return r.serial }
	burst := func(r backstopResult) delta { return r.burst }

	samples("serial dry-run Pod create, client", func(r backstopResult) []time.Duration { return r.pods })
	samples("serial dry-run Deployment create, client", func(r backstopResult) []time.Duration { return r.deployments })
	hist("serial", serial, bsStep, "count", "mean", "p99")
	hist("serial", serial, bsPlugin, "count", "mean", "p99")
	hist("serial", serial, bsChecks, "count", "mean")
	hist("serial", serial, bsWebhook, "mean")
	row("burst: Deployment creates (all returned)", func(r backstopResult) float64 { return r.creates.Seconds() }, formatSeconds)
	row("burst: all pods Running", func(r backstopResult) float64 { return r.running.Seconds() }, formatSeconds)
	hist("burst", burst, bsStep, "count", "mean", "p99")
	hist("burst", burst, bsPlugin, "count", "mean")
	hist("burst", burst, bsChecks, "count")
	hist("burst", burst, bsPostPods, "mean", "p99")

	var sb strings.Builder
	fmt.Fprintf(&sb, "\n## Backstop: the generated policies bound against unbound\n\n")
	fmt.Fprintf(&sb, "- the %d ValidatingAdmissionPolicies modelgate generates from the library's CEL forms (%d of its %d WorkloadPolicies have one), with the library in force and modelgate's webhooks registered: unbound (policy.backstop false) against bound (true: the API server enforces them too); %d round(s), unbound then bound in each, modelgate restarted with the setting before each phase, which starts once the bindings are there (or gone) and the API server refuses a dry-run Pod over %s with its own policy (or does not)\n",
		len(run.policies), run.celForms, libraryPolicies, len(run.results)/2, probePolicy)
	fmt.Fprintf(&sb, "- serial: %d server-side dry-run creates of the opted-in GPU Pod, one at a time, then %d of the Deployment (1 replica), each allowed by every policy and injected by modelgate, timed by this program (nearest-rank quantiles); burst: %d pods through Deployments of %d replicas created at once, until all Running\n",
		serialSamples, serialSamples, info.pods, info.replicas)
	fmt.Fprintf(&sb, "- API server rows are each part's histogram deltas: the mean is exact (sum ÷ count), p99 is estimated within the buckets (the admission histograms' first bound is 5 ms). The step (%s, type validate) pools every validating plugin, modelgate's webhooks included, and every CREATE (in the burst also ReplicaSets, Pods, bindings, Events); the plugin row (%s, name %s) is the API server's own policies alone\n",
		stepDuration, pluginTime, vapPlugin)
	fmt.Fprintf(&sb, "- %s counts only checks that did not admit (denied, warned, audited, or failed): objects every policy allows leave it empty, bound or not\n\n", checkTime)
	if err := t.write(&sb); err != nil {
		return err
	}
	fmt.Fprintf(&sb, "\n%s\n", backstopReading(len(run.policies), unbound, bound))
	_, err = io.WriteString(w, sb.String())
	return err
}

// backstopReading is the table in one line: what binding the generated
// policies changes, from the pooled phases.
func backstopReading(policies int, unbound, bound backstopResult) string {
	change := func(a, b float64) string {
		return fmt.Sprintf("from %s to %s (%s)", formatSeconds(a), formatSeconds(b), ratio(a, b))
	}
	p50 := func(s []time.Duration) float64 { return sampleQuantile(s, 0.5).Seconds() }
	return fmt.Sprintf("Reading: bound, the %d generated policies take a serial dry-run Pod create %s at the median and a Deployment create %s; "+
		"the API server's %s plugin takes %s per CREATE on average, bound, against %s unbound (modelgate's validating webhook: %s); the burst's pods were all Running %s.",
		policies, change(p50(unbound.pods), p50(bound.pods)), change(p50(unbound.deployments), p50(bound.deployments)),
		vapPlugin, formatSeconds(bound.serial.hists[bsPlugin].mean()), formatSeconds(unbound.serial.hists[bsPlugin].mean()),
		formatSeconds(bound.serial.hists[bsWebhook].mean()),
		change(unbound.running.Seconds(), bound.running.Seconds()))
}
