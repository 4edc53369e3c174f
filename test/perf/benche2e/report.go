package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// notAvailable fills a cell without a value: no observations, or no
// baseline to compare with.
const notAvailable = "n/a"

// runInfo describes the run in the report's header.
type runInfo struct {
	pods, replicas, deployments, nodes, rounds int
	gpusPerNode                                int64
	cpus, qps, burst                           int
	goVersion, kubernetes, kwok                string
	webhooks                                   []string
	started                                    time.Time
}

// table is a markdown table: a header row and rows of cells.
type table struct {
	header []string
	rows   [][]string
}

// add appends a row.
func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write renders the table with its columns padded to line up.
func (t *table) write(w io.Writer) error {
	widths := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := widths[i] - len([]rune(c))
			if i == 0 {
				b.WriteString(" " + c + strings.Repeat(" ", pad) + " |")
			} else {
				b.WriteString(" " + strings.Repeat(" ", pad) + c + " |")
			}
		}
		return b.String() + "\n"
	}
	var b strings.Builder
	b.WriteString(line(t.header))
	b.WriteString("|")
	for i, wd := range widths {
		if i == 0 {
			b.WriteString(" " + strings.Repeat("-", wd) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", wd-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		b.WriteString(line(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// summary is one phase kind (with or without) over all rounds: times
// averaged, metric deltas pooled.
type summary struct {
	creates       time.Duration
	times         [milestones]time.Duration
	podsPerSecond float64
	delta         delta
	serial        []time.Duration
}

// summarize averages and pools the results of one phase kind.
func summarize(results []result, webhooks bool, pods int) (summary, error) {
	var s summary
	var ds []delta
	for _, r := range results {
		if r.webhooks != webhooks {
			continue
		}
		ds = append(ds, r.delta)
		s.serial = append(s.serial, r.serial...)
		s.creates += r.creates
		for m := range milestones {
			s.times[m] += r.times[m]
		}
	}
	if len(ds) == 0 {
		return summary{}, nil
	}
	n := time.Duration(len(ds))
	s.creates /= n
	for m := range milestones {
		s.times[m] /= n
	}
	s.podsPerSecond = float64(pods) / s.times[running].Seconds()
	var err error
	s.delta, err = pool(ds)
	return s, err
}

// writeReport writes the markdown report: the run, one table with a column
// per phase and the summaries side by side, and notes on reading it.
func writeReport(w io.Writer, info runInfo, hs, cs []spec, results []result) error {
	without, err := summarize(results, false, info.pods)
	if err != nil {
		return fmt.Errorf("pooling the phases without webhooks: %w", err)
	}
	with, err := summarize(results, true, info.pods)
	if err != nil {
		return fmt.Errorf("pooling the phases with webhooks: %w", err)
	}
	t := &table{header: []string{"metric"}}
	for _, r := range results {
		t.header = append(t.header, r.label())
	}
	t.header = append(t.header, "without (all)", "with (all)", "with - without")

	duration := func(title string, get func(result) time.Duration, sumGet func(summary) time.Duration) {
		row := []string{title}
		for _, r := range results {
			row = append(row, formatSeconds(get(r).Seconds()))
		}
		a, b := sumGet(without).Seconds(), sumGet(with).Seconds()
		t.add(append(row, formatSeconds(a), formatSeconds(b), formatChange(a, b, formatSeconds))...)
	}
	duration("Deployment creates (all returned)", func(r result) time.Duration { return r.creates }, func(s summary) time.Duration { return s.creates })
	for m := range milestones {
		duration("all pods "+milestoneNames[m], func(r result) time.Duration { return r.times[m] }, func(s summary) time.Duration { return s.times[m] })
	}
	rate := []string{"pods/s to Running"}
	for _, r := range results {
		rate = append(rate, formatRate(r.podsPerSecond(info.pods)))
	}
	t.add(append(rate, formatRate(without.podsPerSecond), formatRate(with.podsPerSecond),
		formatChange(without.podsPerSecond, with.podsPerSecond, formatRate))...)

	for _, q := range []float64{0.5, 0.9, 0.99} {
		row := []string{fmt.Sprintf("serial dry-run Pod create, client: p%g", q*100)}
		for _, r := range results {
			row = append(row, formatSeconds(sampleQuantile(r.serial, q).Seconds()))
		}
		a, b := sampleQuantile(without.serial, q).Seconds(), sampleQuantile(with.serial, q).Seconds()
		t.add(append(row, formatSeconds(a), formatSeconds(b), formatChange(a, b, formatSeconds))...)
	}

	for i, s := range hs {
		count := []string{s.title + ": observations"}
		for _, r := range results {
			count = append(count, formatCount(r.delta.hists[i].count))
		}
		a, b := without.delta.hists[i].count, with.delta.hists[i].count
		t.add(append(count, formatCount(a), formatCount(b), formatCountChange(a, b))...)
		for _, q := range []float64{0.5, 0.99} {
			row := []string{fmt.Sprintf("%s: p%g", s.title, q*100)}
			for _, r := range results {
				row = append(row, formatEstimate(r.delta.hists[i].quantile(q)))
			}
			ea, eb := without.delta.hists[i].quantile(q), with.delta.hists[i].quantile(q)
			change := notAvailable
			if ea.ok && eb.ok {
				change = formatChange(ea.value, eb.value, formatSeconds)
			}
			t.add(append(row, formatEstimate(ea), formatEstimate(eb), change)...)
		}
	}
	for i, s := range cs {
		row := []string{s.title}
		for _, r := range results {
			row = append(row, formatCount(r.delta.counters[i]))
		}
		a, b := without.delta.counters[i], with.delta.counters[i]
		t.add(append(row, formatCount(a), formatCount(b), formatCountChange(a, b))...)
	}

	var b strings.Builder
	writeHeader(&b, info)
	if err := t.write(&b); err != nil {
		return err
	}
	writeNotes(&b, info, hs, results)
	_, err = io.WriteString(w, b.String())
	return err
}

// writeHeader describes the run.
func writeHeader(b *strings.Builder, info runInfo) {
	fmt.Fprintf(b, "## bench-e2e: admission latency and time to Running, without and with modelgate's webhooks\n\n")
	fmt.Fprintf(b, "- started %s; %d round(s), phases interleaved (without, with, ...), each in a fresh namespace\n",
		info.started.Format(time.RFC3339), info.rounds)
	fmt.Fprintf(b, "- %d pods per phase (1 GPU each) in %d Deployments of up to %d replicas, created concurrently\n",
		info.pods, info.deployments, info.replicas)
	fmt.Fprintf(b, "- %d fake nodes of %d %s (kwok %s); kube-apiserver, etcd, kube-scheduler, kube-controller-manager %s\n",
		info.nodes, info.gpusPerNode, gpuProduct, info.kwok, info.kubernetes)
	fmt.Fprintf(b, "- scheduler and controller-manager client QPS/burst: %d/%d\n", info.qps, info.burst)
	fmt.Fprintf(b, "- CPUs: %d; Go: %s\n\n", info.cpus, info.goVersion)
}

// writeNotes explains the table and lists the histograms' bucket bounds,
// as scraped.
func writeNotes(b *strings.Builder, info runInfo, hs []spec, results []result) {
	fmt.Fprintf(b, "\nNotes:\n\n")
	fmt.Fprintf(b, "- Times run from the first Deployment create to when this program's pod informer saw the last pod created, bound to a node and Running (kwok marks bound pods Running at once). \"(all)\" columns: times are the mean of the rounds; histograms are pooled over the rounds.\n")
	fmt.Fprintf(b, "- Latencies are estimated from each phase's histogram delta (scrape after minus scrape before) as Prometheus's histogram_quantile does: linear interpolation within the bucket holding the rank, shown as (lower, upper]. \"> x\" means the +Inf bucket, above the highest bound x. The buckets are coarse: read the bucket, not the digits.\n")
	fmt.Fprintf(b, "- \"API server view\": %s, the series of modelgate's webhooks (%s), type admit (mutating) or validating: the time the API server waited for modelgate, TLS and the network included. Each Deployment and each pod is one call of each.\n",
		webhookDuration, strings.Join(info.webhooks, ", "))
	fmt.Fprintf(b, "- The admission step histograms (%s) have no resource label: they pool every CREATE the API server admitted during the phase (Deployments, ReplicaSets, Pods, pod bindings, Events, ...). They exist in both phases: the comparable baseline.\n", stepDuration)
	fmt.Fprintf(b, "- POST rows: %s, verb POST, no subresource, not dry run: the whole request, admission included. Pods are POSTed by the ReplicaSet controller, Deployments by this program.\n", requestDuration)
	fmt.Fprintf(b, "- Serial rows: after each burst, once every pod ran, %d server-side dry-run Pod creates sent one at a time and timed exactly by this program (nearest-rank quantiles of the samples, no buckets): with the webhooks the annotated Pod, which modelgate injects in full, as it does a Pod a human creates; without them the same Pod already injected. The difference is what modelgate adds to one request on a cluster that is not busy.\n", serialSamples)
	fmt.Fprintf(b, "- modelgate handler rows: modelgate's own %s: the time inside modelgate, TLS and the network excluded.\n", crWebhookLat)
	fmt.Fprintf(b, "\nBucket upper bounds, as scraped:\n\n")
	seen := map[string]bool{}
	for i, s := range hs {
		if seen[s.metric] {
			continue
		}
		for _, r := range results {
			if h := r.delta.hists[i]; !h.empty() {
				seen[s.metric] = true
				fmt.Fprintf(b, "- %s (%s): %s\n", s.metric, s.source, formatBounds(h.bounds()))
				break
			}
		}
	}
}

// formatBounds lists bucket bounds compactly.
func formatBounds(bounds []float64) string {
	out := make([]string, len(bounds))
	for i, v := range bounds {
		out[i] = formatBound(v)
	}
	return strings.Join(out, ", ")
}

// formatEstimate shows a quantile and the bucket it fell in.
func formatEstimate(e estimate) string {
	switch {
	case !e.ok:
		return notAvailable
	case math.IsInf(e.upper, 1):
		return "> " + formatBound(e.lower)
	case math.IsInf(e.lower, -1):
		return "≤ " + formatBound(e.upper)
	}
	return fmt.Sprintf("%s (%s, %s]", formatSeconds(e.value), formatBound(e.lower), formatBound(e.upper))
}

// unit picks the unit to show seconds in.
func unit(v float64) (scale float64, name string) {
	switch a := math.Abs(v); {
	case a == 0, a >= 1:
		return 1, "s"
	case a >= 1e-3:
		return 1e3, "ms"
	case a >= 1e-6:
		return 1e6, "µs"
	default:
		return 1e9, "ns"
	}
}

// formatSeconds shows a duration in seconds with three significant digits.
func formatSeconds(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return notAvailable
	}
	scale, name := unit(v)
	return strconv.FormatFloat(v*scale, 'f', decimals(v*scale), 64) + " " + name
}

// formatBound shows a bucket bound as briefly as it was written.
func formatBound(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	if v == 0 {
		return "0"
	}
	scale, name := unit(v)
	return strconv.FormatFloat(v*scale, 'g', 6, 64) + " " + name
}

// decimals gives a value three significant digits (at most two decimals).
func decimals(v float64) int {
	switch a := math.Abs(v); {
	case a >= 100:
		return 0
	case a >= 10:
		return 1
	}
	return 2
}

// formatRate shows pods per second.
func formatRate(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return notAvailable
	}
	return strconv.FormatFloat(v, 'f', decimals(v), 64)
}

// formatCount shows an observation count.
func formatCount(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// formatCountChange shows b - a, signed.
func formatCountChange(a, b float64) string {
	if b >= a {
		return "+" + formatCount(b-a)
	}
	return "-" + formatCount(a-b)
}

// formatChange shows b - a, signed, and relative to a.
func formatChange(a, b float64, format func(float64) string) string {
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return notAvailable
	}
	sign := "+"
	if b < a {
		sign = "-"
	}
	s := sign + format(math.Abs(b-a))
	if a != 0 {
		s += fmt.Sprintf(" (%+.0f%%)", (b-a)/a*100)
	}
	return s
}
