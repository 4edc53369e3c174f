package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one cell: a path under a concurrency, measured.
type result struct {
	requests  int
	errors    int
	elapsed   time.Duration
	latencies []time.Duration // sorted
}

func (r result) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// quantile is the q-quantile of the latencies (0 when there are none).
func (r result) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(q * float64(len(r.latencies)-1))
	return r.latencies[i]
}

// client is an HTTPS client like kube-apiserver's webhook client: HTTP/1.1
// with keep-alive, at most c connections, trusting the bench CA.
func client(roots *x509.CertPool, c int) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		MaxIdleConnsPerHost: c,
		MaxConnsPerHost:     c,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// measure sends body(n), n counting the requests from 0, to url from c
// workers, each with a request in flight at a time, for warmup (not
// counted) and then duration. An answer that is not 200 with
// "allowed":true counts as an error.
func measure(ctx context.Context, hc *http.Client, url string, body func(n uint64) []byte, c int, warmup, duration time.Duration) (result, error) {
	var sent atomic.Uint64
	start := time.Now().Add(warmup)
	end := start.Add(duration)
	var (
		mu  sync.Mutex
		all result
		wg  sync.WaitGroup
	)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			reqs, errs := 0, 0
			for {
				t0 := time.Now()
				if t0.After(end) || ctx.Err() != nil {
					break
				}
				ok := send(ctx, hc, url, body(sent.Add(1)-1))
				if t0.Before(start) {
					continue
				}
				if !ok {
					errs++
					continue
				}
				reqs++
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all.requests += reqs
			all.errors += errs
			all.latencies = append(all.latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	all.elapsed = duration
	slices.Sort(all.latencies)
	if all.requests == 0 {
		return all, fmt.Errorf("%s: no request succeeded (%d errors)", url, all.errors)
	}
	return all, nil
}

var allowed = []byte(`"allowed":true`)

// send posts one review as kube-apiserver does and reports whether the
// answer allowed it.
func send(ctx context.Context, hc *http.Client, url string, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Contains(out, allowed)
}
