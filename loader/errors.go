package loader

import (
	"errors"
	"time"
)

// The failures a load can end with. Sources wrap them (fmt.Errorf("...:
// %w", ErrNotFound)) so that `modelgate load` maps each to its exit code;
// the message around them says what the user wrote and what was wrong.
var (
	// ErrNotFound: the bucket, prefix, repository, revision, tag or file
	// does not exist, or the listing is empty.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied: the credentials are missing, wrong or not allowed
	// (401, 403, a gated repository).
	ErrAccessDenied = errors.New("access denied")
	// ErrVerification: content did not match a digest or size the source
	// vouched for, or an archive was malformed or unsafe.
	ErrVerification = errors.New("verification failed")
	// ErrNoSpace: the destination has not enough free space.
	ErrNoSpace = errors.New("no space left")
	// ErrTimeout: the overall deadline passed, or a part stalled on every
	// attempt.
	ErrTimeout = errors.New("timed out")
	// ErrInvalid: the URI or flags are malformed, or a key cannot be
	// mapped to a path inside the destination.
	ErrInvalid = errors.New("invalid")
	// ErrNotWritable: the loader's user may not write into the
	// destination (a claim whose directory is root's, without fsGroup).
	ErrNotWritable = errors.New("not writable")
)

// Transient marks a failure worth retrying: a 5xx, a 429, a reset or cut
// connection. Sources return it from List and Open; the loader retries
// with jittered exponential backoff, waiting at least RetryAfter when the
// server said so (Retry-After).
type Transient struct {
	Err        error
	RetryAfter time.Duration
}

func (e *Transient) Error() string { return e.Err.Error() }

func (e *Transient) Unwrap() error { return e.Err }

// Retryable wraps err as Transient, with the server's Retry-After (0 when
// none).
func Retryable(err error, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	return &Transient{Err: err, RetryAfter: retryAfter}
}

// IsTransient reports whether err is worth retrying, and how long the
// server asked to wait.
func IsTransient(err error) (time.Duration, bool) {
	var t *Transient
	if errors.As(err, &t) {
		return t.RetryAfter, true
	}
	return 0, false
}

// Kind returns the first of the failure sentinels err wraps, or nil.
func Kind(err error) error {
	for _, k := range []error{ErrInvalid, ErrNotFound, ErrAccessDenied, ErrVerification, ErrNoSpace, ErrTimeout, ErrNotWritable} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
