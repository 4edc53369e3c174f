package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is the mixed-load figure.
type loadResult struct {
	mix      []review
	ramp     []*step
	workers  int
	why      string
	warmup   time.Duration
	hold     *step
	samples  []sample
	policies float64
}

// loadPhase finds the rate the replica sustains and holds it: the ramp,
// a warm-up at the chosen concurrency, then duration of load with the
// replica's RSS, goroutines and heap sampled every sampleEvery.
func loadPhase(ctx context.Context, o options, cp *controlPlane, r *replica, scr *scraper, progress func(string, ...any)) (*loadResult, error) {
	c, err := newHTTPSClient(cp.caData, 2*rampLevels[len(rampLevels)-1])
	if err != nil {
		return nil, err
	}
	base := "https://" + r.webhookAddr
	res := &loadResult{warmup: o.warmup}
	text, err := scr.scrape(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("reading %s's metrics with %s's token: %w", r.name, scraperAccount, err)
	}
	if res.policies, err = gauge(text, "modelgate_policies_loaded"); err != nil {
		return nil, err
	}
	res.mix, err = buildMix(ctx, func(ctx context.Context, path string, body []byte) (int, []byte, error) {
		return post(ctx, c, base+path, body)
	})
	if err != nil {
		return nil, fmt.Errorf("building the mixed load: %w", err)
	}
	l := &loader{client: c, base: base, mix: res.mix, pick: newPicker(res.mix)}
	res.ramp, res.workers, res.why = l.ramp(ctx, o.rampStep, o.maxWorkers, progress)
	progress("holding %d workers: %s; warm-up %s", res.workers, res.why, o.warmup)
	l.run(ctx, res.workers, o.warmup)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	var mu sync.Mutex
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(o.sampleEvery)
		defer t.Stop()
		for {
			s, err := scr.sampleOf(ctx, r)
			if err != nil {
				progress("sampling %s: %v", r.name, err)
			} else {
				mu.Lock()
				res.samples = append(res.samples, s)
				mu.Unlock()
				progress("hold: RSS %s, %g goroutines, heap in use %s", mib(s.rss), s.goroutines, mib(int64(s.heapInuse)))
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	})
	hold := l.run(ctx, res.workers, o.duration)
	stopSampling()
	wg.Wait()
	// The end sample, taken at once, before anything else runs.
	end, err := scr.sampleOf(ctx, r)
	if err != nil {
		return nil, err
	}
	res.samples = append(res.samples, end)
	res.hold = &hold
	return res, nil
}

// attackResult is the attack replay's figure.
type attackResult struct {
	before, after  sample
	peak           int64
	attacks        []attack
	peaks          []int64
	probes         []string
	forged         []string
	normalAfter    string
	alive          bool
	otherKinds     float64
	longestMetric  int
	goroutinesPeak float64
}

// peakRSS samples a process's RSS every few milliseconds and keeps the
// highest since the last reset.
type peakRSS struct {
	pid  int
	peak atomic.Int64
	all  atomic.Int64
}

func (p *peakRSS) run(ctx context.Context) {
	for ctx.Err() == nil {
		if v, err := rssOf(p.pid); err == nil {
			if v > p.peak.Load() {
				p.peak.Store(v)
			}
			if v > p.all.Load() {
				p.all.Store(v)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// attackPhase replays the attacks against a running replica, then checks
// that it still answers a normal review within the webhook timeout.
func attackPhase(ctx context.Context, cp *controlPlane, r *replica, scr *scraper, normal review, progress func(string, ...any)) (*attackResult, error) {
	c, err := newHTTPSClient(cp.caData, 64)
	if err != nil {
		return nil, err
	}
	a := &attacker{client: c, base: "https://" + r.webhookAddr, addr: r.webhookAddr, caData: cp.caData}
	res := &attackResult{}
	if res.before, err = scr.sampleOf(ctx, r); err != nil {
		return nil, err
	}
	pk := &peakRSS{pid: r.pid()}
	pctx, stopPeak := context.WithCancel(ctx)
	defer stopPeak()
	go pk.run(pctx)
	record := func(at attack) {
		res.attacks = append(res.attacks, at)
		res.peaks = append(res.peaks, pk.peak.Swap(0))
		progress("attack: %s: %s; RSS peak %s", at.name, codesString(at.codes), mib(res.peaks[len(res.peaks)-1]))
	}
	pk.peak.Store(0)
	at, err := a.madeUpKinds(ctx)
	if err != nil {
		return nil, err
	}
	record(at)
	if at, err = a.hugeUpdates(ctx, 64, 32); err != nil {
		return nil, err
	}
	record(at)
	record(a.oversize(ctx, 5, false))
	record(a.oversize(ctx, 5, true))
	// The slow attacks run with a normal review every 250ms beside them:
	// what the API server's own reviews get meanwhile.
	during := func(run func(context.Context) attack) {
		actx, cancel := context.WithCancel(ctx)
		var pr *probeResult
		var wg sync.WaitGroup
		wg.Go(func() { pr = a.probe(actx, normal, 250*time.Millisecond) })
		at := run(ctx)
		if s, err := scr.sampleOf(ctx, r); err == nil {
			res.goroutinesPeak = max(res.goroutinesPeak, s.goroutines)
		}
		cancel()
		wg.Wait()
		record(at)
		res.probes = append(res.probes, at.name+": "+pr.String())
	}
	during(func(ctx context.Context) attack {
		var at attack
		var wg sync.WaitGroup
		wg.Go(func() { at = a.slowHeaders(ctx, 300, 40*time.Second) })
		// The goroutines while every connection is open.
		sleep(ctx, 10*time.Second)
		if s, err := scr.sampleOf(ctx, r); err == nil {
			res.goroutinesPeak = max(res.goroutinesPeak, s.goroutines)
		}
		wg.Wait()
		return at
	})
	during(func(ctx context.Context) attack { return a.slowBodies(ctx, 2, 4<<20, 20*time.Second) })

	if res.forged, err = a.forgedRecord(ctx, cp.developer); err != nil {
		return nil, err
	}
	stopPeak()
	res.peak = pk.all.Load()
	res.alive = r.alive()
	sleep(ctx, 15*time.Second)
	// A normal review, within the webhooks' 5s timeout.
	pr := &probeResult{}
	for range 5 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		code, body, err := post(rctx, c, a.base+normal.path, normal.body)
		pr.add(code, err, body, normal, time.Since(t0))
		cancel()
	}
	res.normalAfter = pr.String()
	if res.after, err = scr.sampleOf(ctx, r); err != nil {
		return nil, err
	}
	text, err := scr.scrape(ctx, r)
	if err != nil {
		return nil, err
	}
	res.otherKinds = sumSeries(text, "modelgate_mutating_reviews_total", `kind="other"`) +
		sumSeries(text, "modelgate_validating_reviews_total", `kind="other"`)
	for line := range strings.SplitSeq(string(text), "\n") {
		res.longestMetric = max(res.longestMetric, len(line))
	}
	return res, nil
}

// mib formats bytes as MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
