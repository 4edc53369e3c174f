package loader

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// HTTPOptions configure the HTTP client sources share.
type HTTPOptions struct {
	// CABundle is a PEM file of CA certificates trusted besides the
	// system's (an S3-compatible store or mirror with a private CA).
	CABundle string
	// Conns is the number of connections kept per host: the loader's
	// concurrency.
	Conns int
	// UserAgent is sent with every request.
	UserAgent string
}

// NewHTTPClient returns a client for sources: TLS 1.2 or later with the
// system roots and CABundle, dial and header timeouts, keep-alive
// connections for Conns parallel requests, and no overall timeout (the
// loader's stall watchdog covers bodies). Redirects are followed by the
// client's default policy; a source that sends credentials sets its own
// CheckRedirect.
func NewHTTPClient(o HTTPOptions) (*http.Client, error) {
	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CABundle != "" {
		pem, err := os.ReadFile(o.CABundle)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: %w: %w", err, ErrInvalid)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA bundle %s holds no PEM certificate: %w", o.CABundle, ErrInvalid)
		}
		tlsConf.RootCAs = pool
	}
	conns := max(o.Conns, 1)
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tlsConf,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          4 * conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
		// Model files are already compressed or incompressible; asking for
		// gzip would also hide Content-Length and break ranges.
		DisableCompression: true,
		ReadBufferSize:     256 << 10,
		WriteBufferSize:    64 << 10,
	}
	c := &http.Client{Transport: tr}
	if o.UserAgent != "" {
		c.Transport = userAgent{tr, o.UserAgent}
	}
	return c, nil
}

type userAgent struct {
	rt http.RoundTripper
	ua string
}

func (u userAgent) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("User-Agent") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("User-Agent", u.ua)
	}
	return u.rt.RoundTrip(r)
}

// CheckStatus returns nil for a 2xx answer; otherwise it closes the body
// and returns the status as the loader's failure, naming what was asked
// for: 404 and 410 wrap ErrNotFound, 401 and 403 ErrAccessDenied, 408, 425,
// 429 and 5xx are Transient (with Retry-After). The body is not quoted: it
// may echo a signed URL.
func CheckStatus(resp *http.Response, what string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	err := fmt.Errorf("%s: HTTP %s", what, resp.Status)
	switch code := resp.StatusCode; {
	case code == http.StatusNotFound || code == http.StatusGone:
		return fmt.Errorf("%w: %w", err, ErrNotFound)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %w", err, ErrAccessDenied)
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		return Retryable(err, RetryAfter(resp.Header, time.Now()))
	default:
		return err
	}
}

// RetryAfter reads a Retry-After header (seconds or an HTTP date); 0 when
// absent or malformed.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// RangeBody checks the answer to a GET with "Range: bytes=off-(off+n-1)"
// and returns its body, yielding exactly n bytes or an error: a 206 whose
// Content-Range starts at off, or a 200 when the range is the whole file
// (off 0, n the file's size, as size). A connection cut early is
// Transient; more bytes than asked are ignored.
func RangeBody(resp *http.Response, off, n, size int64) (io.ReadCloser, error) {
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, end, ok := ParseContentRange(resp.Header.Get("Content-Range"))
		if !ok || start != off || end < off+n-1 {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("server answered range %d-%d with Content-Range %q: %w",
				off, off+n-1, resp.Header.Get("Content-Range"), ErrVerification)
		}
	case http.StatusOK:
		if off != 0 || (resp.ContentLength >= 0 && resp.ContentLength != size) {
			_ = resp.Body.Close()
			return nil, fmt.Errorf("server ignored the range request (200 with %d bytes for %d-%d): %w",
				resp.ContentLength, off, off+n-1, ErrVerification)
		}
	default:
		_ = resp.Body.Close()
		return nil, fmt.Errorf("unexpected HTTP %s for a range request", resp.Status)
	}
	return &exactReader{rc: resp.Body, left: n}, nil
}

// ParseContentRange reads a Content-Range header, "bytes start-end/size",
// for sources whose clients hand them the header rather than the
// response.
func ParseContentRange(v string) (start, end int64, ok bool) {
	v, ok = strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !ok {
		return 0, 0, false
	}
	r, _, _ := strings.Cut(v, "/")
	a, b, ok := strings.Cut(r, "-")
	if !ok {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	return start, end, err1 == nil && err2 == nil && start >= 0 && end >= start
}

// exactReader yields exactly left bytes, turning an early EOF into a
// Transient io.ErrUnexpectedEOF.
type exactReader struct {
	rc   io.ReadCloser
	left int64
}

func (r *exactReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	switch {
	case r.left == 0:
		return n, io.EOF
	case errors.Is(err, io.EOF):
		return n, Retryable(fmt.Errorf("connection closed with %d bytes still to come: %w", r.left, io.ErrUnexpectedEOF), 0)
	case err != nil:
		return n, Retryable(err, 0)
	}
	return n, nil
}

func (r *exactReader) Close() error { return r.rc.Close() }

// ExactReader wraps a body that must yield exactly n bytes (for sources
// with their own clients), with the same early-EOF handling as RangeBody.
func ExactReader(rc io.ReadCloser, n int64) io.ReadCloser { return &exactReader{rc: rc, left: n} }
