// Package httpsrc is the loader.Source for one file at an https:// URL: a
// web server, a CDN, a presigned object URL. The file keeps the name of
// the URL path's last segment. Its SHA-256 comes from the user (the URI's
// #sha256=<hex> fragment, as pip writes it, read by ParseDigestFragment)
// and from the server's Repr-Digest or Digest header; when both are known
// they must agree before a byte is fetched.
//
// The file is read in parallel ranges when the server serves them, each
// request carrying If-Range so that a file replaced during the download is
// detected instead of mixed; otherwise in one request from the start. A
// URL's query may be a signature: it is sent, but never shown in a
// message.
package httpsrc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelgate/modelgate/loader"
)

// Config is one file at an http(s) URL.
type Config struct {
	// URL is the file's https (or plain http) URL, without a fragment:
	// the command line reads "#sha256=..." with ParseDigestFragment.
	URL string
	// SHA256 is the content's expected SHA-256 as 64 lower-case hex
	// digits; empty when unknown.
	SHA256 string
	// HTTP is the client, from loader.NewHTTPClient; nil is one with the
	// defaults. Its redirect policy is kept, and a redirect from https to
	// plain http is refused besides.
	HTTP *http.Client
}

// Source lists and reads one file at a URL.
type Source struct {
	url    string // as given, query included: only requests see it
	shown  string // scheme://host/path, for messages and File.Key
	name   string // the file's path in the model
	sha256 string
	client *http.Client
}

var _ loader.Source = (*Source)(nil)

// New checks c; it makes no request.
func New(c Config) (*Source, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL
		}
		return nil, fmt.Errorf("URL %q: %w: %w", shownRaw(c.URL), err, loader.ErrInvalid)
	}
	s := &Source{url: c.URL, shown: shown(u), sha256: c.SHA256}
	bad := func(rule string) error {
		return fmt.Errorf("URL %q %s: %w", s.shown, rule, loader.ErrInvalid)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, bad("must be https://host/path/file")
	case u.Opaque != "" || u.Host == "":
		return nil, bad("must name a host: https://host/path/file")
	case u.Fragment != "" || strings.Contains(c.URL, "#"):
		return nil, bad("must not have a fragment (#sha256=<hex> is read by the command line)")
	}
	if s.name, err = fileName(u); err != nil {
		return nil, fmt.Errorf("URL %q %w", s.shown, err)
	}
	if c.SHA256 != "" {
		if rule := sha256Rule(c.SHA256); rule != "" {
			return nil, fmt.Errorf("sha256 %q of %s %s: %w", c.SHA256, s.shown, rule, loader.ErrInvalid)
		}
	}
	base := c.HTTP
	if base == nil {
		if base, err = loader.NewHTTPClient(loader.HTTPOptions{}); err != nil {
			return nil, err
		}
	}
	client := *base
	client.CheckRedirect = noDowngrade(base.CheckRedirect)
	s.client = &client
	return s, nil
}

// fileName is the last segment of u's path, percent-decoded: the name
// the file gets in the model.
func fileName(u *url.URL) (string, error) {
	p := u.EscapedPath()
	seg := p[strings.LastIndexByte(p, '/')+1:]
	if seg == "" {
		return "", fmt.Errorf("must end in a file name, not \"/\": %w", loader.ErrInvalid)
	}
	name, err := url.PathUnescape(seg)
	if err != nil {
		return "", fmt.Errorf("ends in %q, which is not a valid percent-encoded name: %w", seg, loader.ErrInvalid)
	}
	if strings.Contains(name, "/") {
		return "", fmt.Errorf("ends in %q, which decodes to a name with \"/\": %w", seg, loader.ErrInvalid)
	}
	if _, err := loader.CleanPath(name); err != nil {
		return "", fmt.Errorf("ends in %q, which cannot be a file name: %w", seg, err)
	}
	return name, nil
}

// shown is u for messages: no user information, query or fragment.
func shown(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return v.String()
}

// shownRaw is a URL that does not parse, cut before any query or
// fragment and without user information.
func shownRaw(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		auth, path, _ := strings.Cut(rest, "/")
		if i := strings.LastIndexByte(auth, '@'); i >= 0 {
			raw = scheme + "://" + auth[i+1:] + "/" + path
		}
	}
	return raw
}

// errDowngrade refuses a redirect from https to plain http.
var errDowngrade = errors.New("redirect from https to plain http refused")

// noDowngrade wraps a client's redirect policy (nil: Go's default of at
// most 10 redirects), refusing to leave https.
func noDowngrade(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
			return fmt.Errorf("%w (to host %s)", errDowngrade, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// do sends a request for the URL. Failures to get an answer are
// Transient, except certificate failures and refused redirects.
func (s *Source) do(ctx context.Context, method string, h http.Header, what string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, withoutURL(err), loader.ErrInvalid)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	// Bytes as stored: sizes, ranges and digests are of them.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.client.Do(req)
	if err == nil {
		return resp, nil
	}
	err = fmt.Errorf("%s: %w", what, withoutURL(err))
	var cert *tls.CertificateVerificationError
	if ctx.Err() != nil || errors.As(err, &cert) || errors.Is(err, errDowngrade) {
		return nil, err
	}
	return nil, loader.Retryable(err, 0)
}

// withoutURL drops the URL a *url.Error adds to its message: after a
// redirect it may be a signed one.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
