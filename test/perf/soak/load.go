package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loader sends the mixed load straight to one replica's webhook port over
// TLS, as the API server does (HTTP/1.1, kept-alive connections, the
// serving certificate verified against the CA the webhook configurations
// carry).
type loader struct {
	client *http.Client
	base   string
	mix    []review
	pick   picker
	next   atomic.Uint64
}

// newHTTPSClient trusts only the webhooks' CA, as the API server does.
func newHTTPSClient(caData []byte, conns int) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		return nil, errors.New("the webhooks' CA bundle holds no certificate")
	}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   false,
		},
	}, nil
}

// post sends a body and returns the status and the answer.
func post(ctx context.Context, c *http.Client, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bodyReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("building a request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err //nolint:wrapcheck // the transport's error is the report's.
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, b, nil
}

// step is what one run of the load at a fixed concurrency observed.
type step struct {
	concurrency int
	elapsed     time.Duration
	latencies   []time.Duration // of every request, failed ones included
	failures    *failures
	perReview   []int
}

// rate is the requests answered per second.
func (s step) rate() float64 { return float64(len(s.latencies)) / s.elapsed.Seconds() }

// quantile returns the q-quantile of the latencies (sorting them once).
func (s *step) quantile(q float64) time.Duration {
	if len(s.latencies) == 0 {
		return 0
	}
	if !slices.IsSorted(s.latencies) {
		slices.Sort(s.latencies)
	}
	i := int(q * float64(len(s.latencies)-1))
	return s.latencies[i]
}

// failures counts failed requests by cause, keeping the first few whole.
type failures struct {
	mu      sync.Mutex
	total   int
	byCause map[string]int
	first   []string
}

func (f *failures) add(cause string, detail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total++
	if f.byCause == nil {
		f.byCause = map[string]int{}
	}
	f.byCause[cause]++
	if len(f.first) < 5 {
		f.first = append(f.first, time.Now().Format("15:04:05.000")+" "+detail)
	}
}

// run sends the mix with n workers, each waiting for an answer before the
// next request (a closed loop), for d or until ctx ends.
func (l *loader) run(ctx context.Context, n int, d time.Duration) step {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res := step{concurrency: n, perReview: make([]int, len(l.mix)), failures: &failures{}}
	lat := make([][]time.Duration, n)
	counts := make([][]int, n)
	started := time.Now()
	var wg sync.WaitGroup
	for w := range n {
		counts[w] = make([]int, len(l.mix))
		wg.Go(func() {
			for ctx.Err() == nil {
				i := l.pick.at(l.next.Add(1))
				r := &l.mix[i]
				t0 := time.Now()
				code, body, err := post(context.WithoutCancel(ctx), l.client, l.base+r.path, r.body)
				took := time.Since(t0)
				lat[w] = append(lat[w], took)
				counts[w][i]++
				switch {
				case err != nil:
					res.failures.add("transport: "+errorClass(err), fmt.Sprintf("%s: %v", r.name, err))
				case code != http.StatusOK:
					res.failures.add(fmt.Sprintf("HTTP %d", code), fmt.Sprintf("%s: HTTP %d %s", r.name, code, truncate(body, 200)))
				default:
					if cerr := r.check(body); cerr != nil {
						res.failures.add("wrong answer: "+r.name, fmt.Sprintf("%s: %v", r.name, cerr))
					}
				}
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(started)
	for w := range n {
		res.latencies = append(res.latencies, lat[w]...)
		for i, c := range counts[w] {
			res.perReview[i] += c
		}
	}
	return res
}

// rampLevels are the concurrencies the ramp tries, in order.
var rampLevels = []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}

// degraded says why a step is worse than the best one before it, or "":
// failures, a p99 over a second, or more workers that only queue (the
// rate no higher while p99 grows with the queue).
func degraded(best, cur *step) (why string, hard bool) {
	switch {
	case cur.failures.total > 0:
		return fmt.Sprintf("%d failed requests", cur.failures.total), true
	case cur.quantile(0.99) > time.Second:
		return fmt.Sprintf("p99 %s over 1s", dur(cur.quantile(0.99))), true
	case best == nil || cur.rate() >= 1.05*best.rate():
		return "", false
	case cur.quantile(0.99) > best.quantile(0.99)*13/10:
		return fmt.Sprintf("%.0f reviews/s, not 5%% over the best %.0f/s (%d workers), while p99 rose from %s to %s",
			cur.rate(), best.rate(), best.concurrency, dur(best.quantile(0.99)), dur(cur.quantile(0.99))), false
	}
	return "", false
}

// ramp runs each level of rampLevels for d and returns the steps and the
// level to hold: the one with the best rate before the ramp degraded. A
// level that only queues must be followed by another before the ramp
// stops, so that one noisy level on a shared machine does not end it.
func (l *loader) ramp(ctx context.Context, d time.Duration, maxLevel int, progress func(string, ...any)) ([]*step, int, string) {
	var steps []*step
	var best *step
	queued := 0
	for _, n := range rampLevels {
		if n > maxLevel || ctx.Err() != nil {
			break
		}
		s := l.run(ctx, n, d)
		steps = append(steps, &s)
		progress("ramp: %2d workers: %6.0f reviews/s, p50 %s, p99 %s, %d failed", n, s.rate(),
			dur(s.quantile(0.5)), dur(s.quantile(0.99)), s.failures.total)
		why, hard := degraded(best, &s)
		switch {
		case hard && best == nil:
			return steps, 1, fmt.Sprintf("%d workers degraded (%s)", n, why)
		case hard:
			return steps, best.concurrency, fmt.Sprintf("%d workers degraded (%s)", n, why)
		case why != "":
			if queued++; queued == 2 {
				return steps, best.concurrency, fmt.Sprintf("%d workers degraded (%s), as did the level before", n, why)
			}
		case best == nil || s.rate() >= 1.05*best.rate():
			best, queued = &s, 0
		}
	}
	if best == nil { // interrupted before a level finished
		return steps, 1, "the ramp was interrupted"
	}
	return steps, best.concurrency, "no level degraded up to the ramp's end"
}

// errorClass names a transport error by its kind, for counting.
func errorClass(err error) string {
	var ne interface{ Timeout() bool }
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	}
	msg := err.Error()
	for _, k := range []string{"connection refused", "connection reset", "broken pipe", "tls", "EOF"} {
		if strings.Contains(msg, k) {
			return k
		}
	}
	return "other"
}

// truncate shortens an answer for a report line.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
