package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDegraded checks the ramp's stop rule: failures or a p99 over a
// second stop it; more workers that add under 5% while p99 grows by over
// 30% only queue; a higher rate is never degraded.
func TestDegraded(t *testing.T) {
	mk := func(n int, perSecond int, p99 time.Duration, failed int) *step {
		s := &step{concurrency: n, elapsed: time.Second, failures: &failures{}}
		for range perSecond {
			s.latencies = append(s.latencies, p99)
		}
		for range failed {
			s.failures.add("x", "x")
		}
		return s
	}
	best := mk(2, 1000, 5*time.Millisecond, 0)
	for name, tc := range map[string]struct {
		cur        *step
		want, hard bool
	}{
		"faster":           {cur: mk(3, 1100, 9*time.Millisecond, 0)},
		"failures":         {cur: mk(3, 1100, time.Millisecond, 1), want: true, hard: true},
		"p99 over 1s":      {cur: mk(3, 1100, 2*time.Second, 0), want: true, hard: true},
		"only queues":      {cur: mk(3, 1010, 9*time.Millisecond, 0), want: true},
		"flat, p99 steady": {cur: mk(3, 1010, 6*time.Millisecond, 0)},
	} {
		why, hard := degraded(best, tc.cur)
		if (why != "") != tc.want || hard != tc.hard {
			t.Errorf("%s: degraded %q hard %v, want degraded %v hard %v", name, why, hard, tc.want, tc.hard)
		}
	}
}

// TestMetricsParsing reads gauges and sums counters from Prometheus text.
func TestMetricsParsing(t *testing.T) {
	text := []byte("# HELP go_goroutines x\ngo_goroutines 62\n" +
		"modelgate_mutating_reviews_total{kind=\"other\",outcome=\"error\"} 30\n" +
		"modelgate_mutating_reviews_total{kind=\"other\",outcome=\"allowed\"} 30\n" +
		"modelgate_mutating_reviews_total{kind=\"Pod\",outcome=\"allowed\"} 7\n")
	if v, err := gauge(text, "go_goroutines"); err != nil || v != 62 {
		t.Errorf("go_goroutines = %v, %v; want 62", v, err)
	}
	if _, err := gauge(text, "go_threads"); err == nil {
		t.Error("a missing gauge was read")
	}
	if got := sumSeries(text, "modelgate_mutating_reviews_total", `kind="other"`); got != 60 {
		t.Errorf("kind=other sums to %v, want 60", got)
	}
}

// TestAPIErrorCause names the webhook and the transport failure.
func TestAPIErrorCause(t *testing.T) {
	err := errors.New(`Internal error occurred: failed calling webhook "annotation.inject.modelgate.io": failed to call webhook: Post "https://127.0.0.1:1/mutate?timeout=5s": EOF`)
	if got := apiErrorCause(err); got != `failed calling webhook "annotation.inject.modelgate.io": EOF` {
		t.Errorf("cause %q", got)
	}
	long := errors.New(strings.Repeat("x", 300))
	if got := apiErrorCause(long); len(got) > 170 {
		t.Errorf("a long error is not shortened: %d bytes", len(got))
	}
}
