package loader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errStalled cancels a part's request that received no byte for the stall
// timeout.
var errStalled = errors.New("stalled")

// watchdog cancels requests that make no progress: one ticker for all of
// them instead of a timer per read.
type watchdog struct {
	timeout time.Duration
	mu      sync.Mutex
	watched map[*watch]struct{}
}

type watch struct {
	last   atomic.Int64 // unix nanoseconds of the last progress
	cancel context.CancelCauseFunc
}

func (w *watch) touch() { w.last.Store(time.Now().UnixNano()) }

func newWatchdog(timeout time.Duration) *watchdog {
	return &watchdog{timeout: timeout, watched: map[*watch]struct{}{}}
}

// add watches a request from now on; cancel is called with errStalled when
// it stalls.
func (d *watchdog) add(cancel context.CancelCauseFunc) *watch {
	w := &watch{cancel: cancel}
	w.touch()
	d.mu.Lock()
	d.watched[w] = struct{}{}
	d.mu.Unlock()
	return w
}

func (d *watchdog) remove(w *watch) {
	d.mu.Lock()
	delete(d.watched, w)
	d.mu.Unlock()
}

// run checks the watched requests until ctx ends.
func (d *watchdog) run(ctx context.Context) {
	tick := max(d.timeout/8, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			limit := now.Add(-d.timeout).UnixNano()
			d.mu.Lock()
			for w := range d.watched {
				if w.last.Load() < limit {
					w.cancel(errStalled)
					delete(d.watched, w)
				}
			}
			d.mu.Unlock()
		}
	}
}
