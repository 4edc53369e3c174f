package env

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// The load's pace: an admission started every LoadInterval, at most
// LoadInFlight at a time; a tick that finds them all in flight is skipped
// (counted, not a failure: the machine, not the admission, is slow).
const (
	LoadInterval = 50 * time.Millisecond
	LoadInFlight = 8
)

// Load makes admissions at a steady pace until stopped (a rotation, an
// upgrade, a replica lost under a steady create load), counting those
// that succeed and keeping why the others did not.
type Load struct {
	create  func(context.Context) error
	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time
	mu      sync.Mutex
	ok      int
	skipped int
	failed  []error
	ended   time.Time
}

// StartLoad calls create every LoadInterval until Stop. create makes one
// admission through the API server (a server-side dry run of an opted-in
// Pod, say) and says whether it was admitted as expected.
func StartLoad(ctx context.Context, create func(context.Context) error) *Load {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{create: create, cancel: cancel, done: make(chan struct{}), started: time.Now()}
	go func() {
		defer close(l.done)
		var wg sync.WaitGroup
		slots := make(chan struct{}, LoadInFlight)
		tick := time.NewTicker(LoadInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				wg.Wait()
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				l.mu.Lock()
				l.skipped++
				l.mu.Unlock()
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				at := time.Now()
				// Not ctx: a create in flight when the load stops finishes.
				l.record(create(context.WithoutCancel(ctx)), at)
			})
		}
	}()
	return l
}

func (l *Load) record(err error, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, fmt.Errorf("create at %s: %w", at.Format("15:04:05.000"), err))
		return
	}
	l.ok++
}

// Burst makes n admissions at once beside the steady load, recorded as
// its own, and returns when they are done.
func (l *Load) Burst(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			at := time.Now()
			l.record(l.create(ctx), at)
		})
	}
	wg.Wait()
}

// Admitted is the count of admissions that succeeded so far.
func (l *Load) Admitted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok
}

// WaitMore waits until n more admissions have succeeded, for at most
// timeout.
func (l *Load) WaitMore(ctx context.Context, n int, timeout time.Duration) error {
	want := l.Admitted() + n
	if err := wait.PollUntilContextTimeout(ctx, LoadInterval, timeout, true, func(context.Context) (bool, error) {
		return l.Admitted() >= want, nil
	}); err != nil {
		return fmt.Errorf("waiting for %d more admissions: %w", n, err)
	}
	return nil
}

// Stop stops the load, waits for the admissions in flight and returns
// the count that succeeded and the failures.
func (l *Load) Stop() (int, []error) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = time.Now()
	return l.ok, l.failed
}

// Skipped is the count of ticks skipped with every admission in flight.
func (l *Load) Skipped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.skipped
}

// Rate is the successful admissions' rate over the load's run, once
// stopped.
func (l *Load) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.ok) / l.ended.Sub(l.started).Seconds()
}
