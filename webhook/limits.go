package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/semaphore"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Limits bound what the webhook server spends on requests, whoever sends
// them: the port is reachable by more than the API server, and every
// review costs memory in proportion to its body (decoding, the old and new
// objects, the patch: about 25 times the body, measured on a 5 MB UPDATE).
type Limits struct {
	// MaxRequestBytes refuses a larger body (413) before it is read. The
	// API server's largest review is an UPDATE of a maximal object, twice
	// (object and oldObject): etcd's 1.5 MiB request limit makes that
	// about 3 MiB of JSON, so 7 MiB, controller-runtime's own cap, leaves
	// room.
	MaxRequestBytes int64
	// MaxInFlightBytes bounds the bodies of the reviews handled at once.
	// A review is counted at its Content-Length (MaxRequestBytes when the
	// sender does not say) and at least minReviewBytes.
	MaxInFlightBytes int64
	// QueueWait is how long a review waits for room before it is refused
	// (429); the API server then applies the webhook's failure policy.
	QueueWait time.Duration
	// ReadTimeout and WriteTimeout bound reading the request and writing
	// the answer, from when the handler starts: a sender that trickles its
	// body holds its room for at most ReadTimeout.
	ReadTimeout, WriteTimeout time.Duration
}

// minReviewBytes is the least a review is counted at: decoding even an
// empty one allocates.
const minReviewBytes = 16 << 10

// DefaultLimits are the limits the webhook server runs with: with the
// manager's 256Mi memory limit and about 60 MB at rest, 8 MiB of bodies in
// flight is about 200 MB at the worst, while hundreds of ordinary reviews
// (a few KB each) run at once. The timeouts sit inside the webhooks' 5s
// timeoutSeconds.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes:  7 << 20,
		MaxInFlightBytes: 8 << 20,
		QueueWait:        time.Second,
		ReadTimeout:      5 * time.Second,
		WriteTimeout:     10 * time.Second,
	}
}

// Limiter is one budget of in-flight bytes shared by the handlers it wraps.
type Limiter struct {
	l   Limits
	sem *semaphore.Weighted
}

// NewLimiter returns a limiter with its own budget.
func NewLimiter(l Limits) *Limiter {
	return &Limiter{l: l, sem: semaphore.NewWeighted(l.MaxInFlightBytes)}
}

// Wrap puts h behind the limiter's budget.
func (lm *Limiter) Wrap(h http.Handler) http.Handler {
	return &limited{Limiter: lm, next: h}
}

// limited is a handler behind a Limiter.
type limited struct {
	*Limiter
	next http.Handler
}

var errTooBusy = errors.New("too many reviews in flight")

// ServeHTTP implements http.Handler.
func (h *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	rc := http.NewResponseController(w)
	// A ResponseWriter that cannot set deadlines (a test recorder) has
	// none to set: the errors are not worth failing the review for.
	_ = rc.SetReadDeadline(now.Add(h.l.ReadTimeout))
	_ = rc.SetWriteDeadline(now.Add(h.l.WriteTimeout))

	size := r.ContentLength
	if size > h.l.MaxRequestBytes {
		http.Error(w, fmt.Sprintf("request body of %d bytes is larger than the %d bytes a review may have", size, h.l.MaxRequestBytes),
			http.StatusRequestEntityTooLarge)
		return
	}
	weight := size
	if weight < 0 {
		weight = h.l.MaxRequestBytes
	}
	weight = min(max(weight, minReviewBytes), h.l.MaxInFlightBytes)
	if err := h.acquire(r.Context(), weight); err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer h.sem.Release(weight)
	r.Body = http.MaxBytesReader(w, r.Body, h.l.MaxRequestBytes)
	h.next.ServeHTTP(w, r)
}

// acquire waits up to QueueWait for room for weight bytes.
func (h *limited) acquire(ctx context.Context, weight int64) error {
	if h.sem.TryAcquire(weight) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.l.QueueWait)
	defer cancel()
	if err := h.sem.Acquire(ctx, weight); err != nil {
		return fmt.Errorf("%w: waited %s for room for %d bytes", errTooBusy, h.l.QueueWait, weight)
	}
	return nil
}

// limitedServer is a webhook server whose every handler, modelgate's own
// and those controller-runtime's builders register (the AIInference
// defaulter, validator and conversion), runs behind one Limiter, and
// closes its connections once the replica drains (even a refusal).
type limitedServer struct {
	crwebhook.Server
	limiter *Limiter
	drain   *drain
}

// Register implements crwebhook.Server.
func (s limitedServer) Register(path string, h http.Handler) {
	s.Server.Register(path, s.drain.wrap(s.limiter.Wrap(h)))
}
