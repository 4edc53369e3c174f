package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/modelgate/modelgate/loader"
)

// The S3 error codes, by the loader failure they are.
var (
	notFoundCodes = []string{"NoSuchBucket", "NoSuchKey", "NotFound", "NoSuchVersion"}
	deniedCodes   = []string{
		"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
		"TokenRefreshRequired", "AllAccessDisabled", "AccountProblem", "InvalidSecurity", "AuthorizationHeaderMalformed",
	}
	transientCodes = []string{
		"SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable",
		"Throttling", "ThrottlingException", "TooManyRequests", "RequestThrottled", "OperationAborted",
	}
	changedCodes = []string{"PreconditionFailed", "InvalidRange"}
)

// classify turns a failure of a request about what (an s3:// URL) into
// the loader's terms: ErrNotFound, ErrAccessDenied (naming the credential
// source), ErrVerification for an object changed under us, ErrInvalid,
// or Transient (5xx, throttling, cut connections) with the server's
// Retry-After. The S3 error message is not quoted, only its code.
func (s *Source) classify(err error, what string, retryAfter time.Duration) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		loader.Kind(err) != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, ok := loader.IsTransient(err); ok {
		return loader.Retryable(fmt.Errorf("%s: %w", what, err), retryAfter)
	}
	var r minio.ErrorResponse
	if !errors.As(err, &r) || (r.Code == "" && r.StatusCode == 0) {
		switch {
		case isCertError(err):
			return fmt.Errorf("%s: the store's TLS certificate is not trusted (is its CA in the CA bundle?): %w", what, err)
		case isNetError(err):
			return loader.Retryable(fmt.Errorf("%s: %w", what, err), retryAfter)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	msg := fmt.Sprintf("%s: %s", what, describe(r))
	code := r.StatusCode
	switch {
	case r.Code == "NoSuchBucket":
		return fmt.Errorf("%s: bucket %q does not exist: %w", what, s.bucket, loader.ErrNotFound)
	case r.Code == "InvalidObjectState": // a 403, but not about credentials
		return fmt.Errorf("%s: the object is archived; restore it before loading", msg)
	case in(r.Code, notFoundCodes) || code == http.StatusNotFound || code == http.StatusGone:
		return fmt.Errorf("%s: %w", msg, loader.ErrNotFound)
	case in(r.Code, deniedCodes) || code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%s, using %s: %w", msg, s.creds, loader.ErrAccessDenied)
	case in(r.Code, changedCodes) || code == http.StatusPreconditionFailed || code == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%s: object changed during download: %w", msg, loader.ErrVerification)
	case in(r.Code, transientCodes) || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return loader.Retryable(errors.New(msg), retryAfter)
	case r.Code == "InvalidBucketName" || r.Code == "XMinioInvalidObjectName" || r.Code == "InvalidArgument":
		return fmt.Errorf("%s: %w", msg, loader.ErrInvalid)
	default:
		return errors.New(msg)
	}
}

// describe names an S3 error by its code and HTTP status.
func describe(r minio.ErrorResponse) string {
	status := ""
	if r.StatusCode != 0 {
		status = fmt.Sprintf("HTTP %d %s", r.StatusCode, http.StatusText(r.StatusCode))
	}
	// Without an error body the client uses the status line as the code.
	if r.Code == "" || strings.Contains(r.Code, " ") {
		return strings.TrimSpace(status)
	}
	if status == "" {
		return r.Code
	}
	return r.Code + " (" + status + ")"
}

func in(code string, codes []string) bool {
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}

// isCertError reports a TLS certificate the client does not trust.
func isCertError(err error) bool {
	var (
		unknownCA   x509.UnknownAuthorityError
		certInvalid x509.CertificateInvalidError
		hostname    x509.HostnameError
		verify      *tls.CertificateVerificationError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &certInvalid) || errors.As(err, &hostname) || errors.As(err, &verify)
}

// isNetError reports a failure of the connection rather than an answer
// (a request that got no response, a body cut short): worth retrying,
// unless it is a TLS certificate or protocol mismatch, which retrying does
// not mend.
func isNetError(err error) bool {
	var (
		record tls.RecordHeaderError
		ue     *url.Error
		oe     *net.OpError
	)
	if isCertError(err) || errors.As(err, &record) {
		return false
	}
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// retryAfterKey keys the *retryAfter a request's context carries.
type retryAfterKey struct{}

// retryAfter holds the last Retry-After the server sent in answer to the
// requests of one call (the S3 client's errors do not carry headers).
type retryAfter struct {
	mu sync.Mutex
	d  time.Duration
}

// withRetryAfter returns a context whose requests record the server's
// Retry-After into the returned holder.
func withRetryAfter(ctx context.Context) (context.Context, *retryAfter) {
	ra := &retryAfter{}
	return context.WithValue(ctx, retryAfterKey{}, ra), ra
}

// get returns the recorded Retry-After (0 when none).
func (ra *retryAfter) get() time.Duration {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.d
}

// recordRetryAfter is a transport that records the Retry-After of
// throttled and failed answers into the request context's holder.
type recordRetryAfter struct{ rt http.RoundTripper }

func (t recordRetryAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil || (resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests) {
		return resp, err
	}
	if ra, ok := r.Context().Value(retryAfterKey{}).(*retryAfter); ok {
		if d := loader.RetryAfter(resp.Header, time.Now()); d > 0 {
			ra.mu.Lock()
			ra.d = d
			ra.mu.Unlock()
		}
	}
	return resp, nil
}
