package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	// MaxInFlightBytes bounds the bodies of the reviews handled at once,
	// each counted at its length and at least minReviewBytes, and,
	// separately, the bytes of bodies still being received (past the
	// first freeReadBytes of each).
	MaxInFlightBytes int64
	// QueueWait is how long a review waits for room before it is refused
	// (429); the API server then applies the webhook's failure policy.
	QueueWait time.Duration
	// ReadTimeout and WriteTimeout bound reading the request and writing
	// the answer, from when the handler starts: a sender that trickles its
	// body holds its reading room for at most ReadTimeout.
	ReadTimeout, WriteTimeout time.Duration
}

// minReviewBytes is the least a review is counted at: decoding even an
// empty one allocates.
const minReviewBytes = 16 << 10

// freeReadBytes of every body are read without counting against the
// reading budget: the API server's ordinary reviews (a few KB) never wait
// behind large bodies being received.
const freeReadBytes = 32 << 10

// DefaultLimits are the limits the webhook server runs with: with the
// manager's 256Mi memory limit and about 80 MB under load, 8 MiB of bodies
// in flight is about 200 MB at the worst, while hundreds of ordinary
// reviews (a few KB each) run at once. The timeouts sit inside the
// webhooks' 5s timeoutSeconds.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestBytes:  7 << 20,
		MaxInFlightBytes: 8 << 20,
		QueueWait:        time.Second,
		ReadTimeout:      5 * time.Second,
		WriteTimeout:     10 * time.Second,
	}
}

// Limiter is the budgets shared by the handlers it wraps. A review is
// received first, its bytes past freeReadBytes counted against the
// reading budget; once
// whole, it is counted against the in-flight budget for as long as it is
// handled. So a sender that trickles a large body holds reading budget
// only: other large bodies wait, but the reviews being handled, and the
// small ones arriving, do not. make soak's slow-bodies attack measures it.
type Limiter struct {
	l                 Limits
	inFlight, reading *semaphore.Weighted
}

// NewLimiter returns a limiter with its own budgets (MaxInFlightBytes
// each).
func NewLimiter(l Limits) *Limiter {
	return &Limiter{l: l, inFlight: semaphore.NewWeighted(l.MaxInFlightBytes), reading: semaphore.NewWeighted(l.MaxInFlightBytes)}
}

// Wrap puts h behind the limiter's budgets.
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

	if size := r.ContentLength; size > h.l.MaxRequestBytes {
		http.Error(w, fmt.Sprintf("request body of %d bytes is larger than the %d bytes a review may have", size, h.l.MaxRequestBytes),
			http.StatusRequestEntityTooLarge)
		return
	}
	body, held, err := h.receive(r.Context(), w, r.Body, r.ContentLength)
	defer func() { h.reading.Release(held) }()
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.Is(err, errTooBusy):
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		case errors.As(err, &tooLarge):
			http.Error(w, fmt.Sprintf("request body is larger than the %d bytes a review may have", h.l.MaxRequestBytes),
				http.StatusRequestEntityTooLarge)
		default:
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		}
		return
	}
	weight := min(max(int64(len(body)), minReviewBytes), h.l.MaxInFlightBytes)
	if err := acquire(r.Context(), h.inFlight, weight, h.l.QueueWait); err != nil {
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer h.inFlight.Release(weight)
	// The body is whole and counted in flight: its reading room is free.
	h.reading.Release(held)
	held = 0
	r.Body = &readBody{Reader: bytes.NewReader(body), data: body}
	r.ContentLength = int64(len(body))
	h.next.ServeHTTP(w, r)
}

// readBody is a request body the limits have read whole: reviewHTTP takes
// its bytes as they are instead of copying them.
type readBody struct {
	*bytes.Reader
	data []byte
}

// Close implements io.Closer.
func (*readBody) Close() error { return nil }

// receive reads the whole body, at most MaxRequestBytes, counting every
// byte of its buffer past freeReadBytes against the reading budget before
// it is allocated: at once for a body whose length is declared (the API
// server always declares it; counting it in parts would let two large
// bodies each hold half the budget and wait for the rest), and as the
// buffer grows for one sent in chunks. It returns the body and the
// reading budget held, which the caller releases (also on error).
func (h *limited) receive(ctx context.Context, w http.ResponseWriter, body io.Reader, declared int64) ([]byte, int64, error) {
	rd := http.MaxBytesReader(w, io.NopCloser(body), h.l.MaxRequestBytes)
	// One byte more than declared, so the end is read without growing.
	limit := h.l.MaxRequestBytes + 1
	if declared >= 0 {
		limit = min(limit, declared+1)
	}
	var held int64
	// room makes the buffer's capacity c, counted first.
	room := func(buf []byte, c int64) ([]byte, error) {
		if need := min(max(c-freeReadBytes, 0), h.l.MaxInFlightBytes) - held; need > 0 {
			if err := acquire(ctx, h.reading, need, h.l.QueueWait); err != nil {
				return nil, err
			}
			held += need
		}
		next := make([]byte, len(buf), c)
		copy(next, buf)
		return next, nil
	}
	initial := min(max(limit, 512), freeReadBytes)
	if declared >= 0 {
		initial = limit
	}
	buf, err := room(nil, initial)
	if err != nil {
		return nil, held, err
	}
	for {
		if len(buf) == cap(buf) {
			grown := min(int64(cap(buf))*2, limit)
			if grown <= int64(cap(buf)) { // the declared length was wrong: MaxBytesReader or EOF decide
				grown = int64(cap(buf)) + 512
			}
			if buf, err = room(buf, grown); err != nil {
				return nil, held, err
			}
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, held, nil
		case err != nil:
			return nil, held, err //nolint:wrapcheck // the reader's error is what the answer says.
		}
	}
}

// acquire waits up to wait for weight of sem.
func acquire(ctx context.Context, sem *semaphore.Weighted, weight int64, wait time.Duration) error {
	if sem.TryAcquire(weight) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := sem.Acquire(ctx, weight); err != nil {
		return fmt.Errorf("%w: waited %s for room for %d bytes", errTooBusy, wait, weight)
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
