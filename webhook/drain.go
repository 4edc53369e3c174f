package webhook

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// A replica asked to stop drains before it stops: for the drain period it
// goes on accepting connections and answering every review, but /readyz
// fails (the Service takes it out of its endpoints, if the Pod's deletion
// has not already) and every answer closes its connection ("Connection:
// close"; Go's HTTP/2 server turns that into a GOAWAY). Only then does the
// manager stop, and the webhook server close what is left.
//
// Without it, SIGTERM closes the API server's idle kept-alive connections
// at once, and a review the API server has just written to one of them
// fails (EOF, broken pipe): the API server does not retry a POST, so the
// webhook's failurePolicy refuses the user's request. The connections a
// drain leaves to close have been idle through the whole period while the
// API server reused its busier ones, so it is not about to pick them.
// make soak's rolling restart measures the difference.

// errDraining is the readiness check's answer while the replica drains.
var errDraining = errors.New("shutting down: draining connections")

// drain is one manager's drain state.
type drain struct {
	period   time.Duration
	draining atomic.Bool
}

// wrap makes h's answers close their connections once the drain started.
func (d *drain) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// check is the readiness check: it fails from the start of the drain.
func (d *drain) check(*http.Request) error {
	if d.draining.Load() {
		return errDraining
	}
	return nil
}

// after returns a context that ends the period after ctx ends, having
// started the drain when ctx ended.
func (d *drain) after(ctx context.Context, log logr.Logger) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-out.Done():
			return
		}
		d.draining.Store(true)
		if d.period > 0 {
			log.Info("draining: answering with Connection: close, /readyz failing, until the drain period ends", "drainPeriod", d.period.String())
			t := time.NewTimer(d.period)
			select {
			case <-t.C:
			case <-out.Done():
				t.Stop()
			}
		}
		cancel()
	}()
	return out, cancel
}

// drainingManager is a manager that drains before it stops.
type drainingManager struct {
	manager.Manager
	drain *drain
}

// Start runs the manager until ctx ends and the drain period after it has
// passed, then stops it (in-flight reviews get the shutdown grace period).
func (m drainingManager) Start(ctx context.Context) error {
	inner, cancel := m.drain.after(ctx, m.GetLogger().WithName("drain"))
	defer cancel()
	return m.Manager.Start(inner) //nolint:wrapcheck // the manager's own error.
}
