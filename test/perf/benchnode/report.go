package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// report prints each round's timeline, the loader's throughput beside the
// host's, and the node's memory idle and with a Pod (after).
func report(w io.Writer, size int64, files int, rounds []round, idle, after map[string]rss) {
	fmt.Fprintf(w, "\nan injected vLLM Deployment (hf://, %d MiB in %d shards + config.json) to Ready on the real node; times from the create call, as a watch saw them\n\n", size>>20, files)
	fmt.Fprintf(w, "%-6s %10s %12s %11s %15s %9s %15s %13s %9s   %s\n",
		"round", "admission", "controllers", "scheduling", "sandbox+pull", "loader", "engine start", "engine ready", "total", "images pulled")
	for i, r := range rounds {
		pulls := "none (on the node)"
		if len(r.pulls) > 0 {
			pulls = fmt.Sprint(r.pulls)
		}
		fmt.Fprintf(w, "%-6d %10s %12s %11s %15s %9s %15s %13s %9s   %s\n", i+1,
			ms(r.admitted), ms(r.podCreated-r.admitted), ms(r.scheduled-r.podCreated), ms(r.loaderStarted-r.scheduled),
			ms(r.loaderDone-r.loaderStarted), ms(r.engineStarted-r.loaderDone), ms(r.ready-r.engineStarted), ms(r.ready), pulls)
	}
	fmt.Fprintf(w, "\nthe loader's throughput (its outcome line), in its container on the node and on the host, same binary, model, Hub and disk\n\n")
	fmt.Fprintf(w, "%-6s %14s %14s %7s   %s\n", "round", "container MB/s", "host MB/s", "ratio", "the loader's termination message")
	for i, r := range rounds {
		ratio := 0.0
		if r.hostMBps > 0 {
			ratio = r.loaderMBps / r.hostMBps
		}
		fmt.Fprintf(w, "%-6d %14.1f %14.1f %7.2f   %s\n", i+1, r.loaderMBps, r.hostMBps, ratio, r.message)
	}
	fmt.Fprintf(w, "\nthe node's memory (MiB): resident before the first round, with the last round's Pod Ready, and the peak\n\n")
	fmt.Fprintf(w, "%-22s %10s %10s %10s\n", "process", "idle", "one pod", "peak")
	names := slices.Sorted(maps.Keys(after))
	for _, n := range slices.Sorted(maps.Keys(idle)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		fmt.Fprintf(w, "%-22s %10.1f %10.1f %10.1f\n", n, float64(idle[n].now)/1024, float64(after[n].now)/1024, float64(after[n].peak)/1024)
	}
}

// ms is a duration in milliseconds, for a table.
func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}
