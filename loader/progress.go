package loader

import (
	"context"
	"time"
)

// Progress is a snapshot of a running load.
type Progress struct {
	Phase string
	// Done and Total are bytes of the model on disk (resumed ones
	// included) and in all.
	Done, Total int64
	// Fetched is what this run read from the source.
	Fetched int64
	// Rate is bytes fetched per second since the start; ETA the time left
	// at that rate (0 when unknown).
	Rate    float64
	ETA     time.Duration
	Elapsed time.Duration
}

// report logs progress every ProgressEvery and keeps the lease alive
// (its file changes while bytes arrive), until ctx ends. A lost lease
// cancels the load.
func (l *loadRun) report(ctx context.Context, cancel context.CancelCauseFunc) {
	beat := time.NewTicker(min(time.Second, l.o.ProgressEvery, l.o.TakeoverAfter/4))
	defer beat.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-beat.C:
			p := l.snapshot()
			if err := l.lease.beat(p.Fetched+p.Done, p.Phase); err != nil {
				cancel(err)
				return
			}
			if now.Sub(last) < l.o.ProgressEvery || p.Phase != "fetching" {
				continue
			}
			last = now
			if l.o.Progress != nil {
				l.o.Progress(p)
			}
			l.log.Info("progress", "phase", p.Phase, "bytes", p.Done, "total", p.Total, "percent", percent(p.Done, p.Total),
				"rate", HumanBytes(int64(p.Rate))+"/s", "eta", p.ETA.Round(time.Second).String())
		}
	}
}

func (l *loadRun) snapshot() Progress {
	phase, _ := l.phase.Load().(string)
	p := Progress{Phase: phase, Total: l.total.Load(), Elapsed: time.Since(l.start),
		Done: l.eng.written.Load(), Fetched: l.eng.fetched.Load()}
	if s := p.Elapsed.Seconds(); s > 0 {
		p.Rate = float64(p.Fetched) / s
	}
	if p.Rate > 0 && p.Total > p.Done {
		p.ETA = time.Duration(float64(p.Total-p.Done) / p.Rate * float64(time.Second))
	}
	return p
}

func percent(a, b int64) int {
	if b <= 0 {
		return 100
	}
	return int(a * 100 / b)
}
