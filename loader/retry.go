package loader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how long to retry transient failures.
type RetryPolicy struct {
	// Attempts is the number of tries in all, at least 1.
	Attempts int
	// Base is the first backoff; each next one doubles, up to Max, with
	// full jitter. A server's Retry-After is waited at least, up to
	// MaxRetryAfter.
	Base, Max     time.Duration
	MaxRetryAfter time.Duration
}

// DefaultRetry is the policy for listings and parts: 8 tries over about
// a minute, honouring Retry-After up to 2 minutes.
var DefaultRetry = RetryPolicy{Attempts: 8, Base: 250 * time.Millisecond, Max: 15 * time.Second, MaxRetryAfter: 2 * time.Minute}

// Do runs fn until it succeeds, fails with an error that is not
// Transient, the attempts run out or ctx ends. The last error is
// returned, with the number of attempts when there were several.
func (p RetryPolicy) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	attempts := max(p.Attempts, 1)
	var err error
	for i := range attempts {
		if err = fn(ctx); err == nil {
			return nil
		}
		after, ok := IsTransient(err)
		if !ok || i == attempts-1 {
			break
		}
		if cerr := Sleep(ctx, p.Backoff(i, after)); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
	if _, ok := IsTransient(err); ok && attempts > 1 {
		return fmt.Errorf("after %d attempts: %w", attempts, err)
	}
	return err
}

// Backoff is the wait before retry i+1 (i from 0): full jitter over an
// exponential ceiling, and at least retryAfter (capped).
func (p RetryPolicy) Backoff(i int, retryAfter time.Duration) time.Duration {
	ceiling := p.Base << min(i, 20)
	if ceiling > p.Max || ceiling <= 0 {
		ceiling = p.Max
	}
	d := time.Duration(rand.Int64N(int64(ceiling) + 1)) //nolint:gosec // backoff jitter, not a secret
	if retryAfter > 0 {
		d = max(d, min(retryAfter, p.MaxRetryAfter))
	}
	return d
}

// Sleep waits d or until ctx ends, returning ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
