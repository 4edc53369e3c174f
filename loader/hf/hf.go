// Package hf is the loader.Source for hf://org/repo[@revision]: a model
// repository on the Hugging Face Hub, or a mirror of it, read over the
// Hub's HTTP API as huggingface_hub reads it. The revision (a branch, a
// tag or a commit; main when none) is resolved to a commit, the commit's
// tree is listed page by page, and files are read with ranged GETs of
// their resolve URLs, following the Hub's redirects (a renamed
// repository, LFS content on a CDN behind a signed URL).
//
// HF_ENDPOINT names the Hub (default https://huggingface.co; a mirror may
// add a path). The token is the first of TokenVars that is set: HF_TOKEN,
// HUGGING_FACE_HUB_TOKEN, then the names Secrets commonly give it, so that
// a Secret given whole to the loader (envFrom) works as it is; without one
// the requests are anonymous, which public repositories accept. The token
// is sent as a bearer token to the endpoint's own origin (scheme, host and
// port) only: a redirect anywhere else goes without it.
package hf

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelgate/modelgate/loader"
)

// DefaultEndpoint is the Hugging Face Hub.
const DefaultEndpoint = "https://huggingface.co"

// DefaultRevision is the branch read when the URI names none.
const DefaultRevision = "main"

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 10

// Config is one hf:// model.
type Config struct {
	// Repo is the repository, "org/name".
	Repo string
	// Revision is a branch, tag or commit; "" is main.
	Revision string
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
	// HTTP is the base client, from loader.NewHTTPClient; nil is one with
	// the defaults. Its redirect policy is replaced.
	HTTP *http.Client
}

// Source lists and reads one revision of a Hub repository.
type Source struct {
	repo, rev string
	endpoint  *url.URL // HF_ENDPOINT, without a trailing slash
	base      string   // endpoint as a string
	token     string
	tokenVar  string // the variable the token came from, for messages
	// client follows redirects, sending the token to the endpoint only;
	// probe follows those on the endpoint's origin only.
	client, probe *http.Client

	mu     sync.Mutex
	commit string // what List resolved the revision to
}

var _ loader.Source = (*Source)(nil)

// Variables the Source reads.
const (
	// EnvEndpoint names the Hub or a mirror.
	EnvEndpoint = "HF_ENDPOINT"
	// EnvToken and EnvHubToken are huggingface_hub's token variables.
	EnvToken    = "HF_TOKEN"
	EnvHubToken = "HUGGING_FACE_HUB_TOKEN" //nolint:gosec // a variable name, not a credential
)

// TokenVars are the variables a token is read from, in order: those of
// huggingface_hub, then the names Secrets commonly give a Hugging Face
// token (LangChain's, other tools', and keys in lower case), which envFrom
// turns into variables of the same name. The generic GenericTokenVar comes
// last, and counts only for a Hub token (see hubTokenPrefix).
var TokenVars = []string{
	EnvToken, EnvHubToken,
	"HUGGINGFACEHUB_API_TOKEN", "HF_API_TOKEN", "HUGGINGFACE_TOKEN",
	"hf_token", "hf_api_token", "huggingface_token",
	GenericTokenVar,
}

// GenericTokenVar is a Secret key named just "token". Many Secrets have
// one, holding all sorts of tokens (a service account token Secret, for
// one), so it is read only when its value looks like a Hub token; map it
// to HF_TOKEN with modelgate.io/model-credentials-keys otherwise.
const GenericTokenVar = "token"

// hubTokenPrefix starts every Hugging Face Hub access token.
const hubTokenPrefix = "hf_"

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$`)

// New checks c and reads the endpoint and token from the environment. It
// makes no request.
func New(c Config) (*Source, error) {
	org, name, ok := strings.Cut(c.Repo, "/")
	if !ok || !nameRE.MatchString(org) || !nameRE.MatchString(name) || strings.Contains(c.Repo, "..") {
		return nil, fmt.Errorf("hf repository %q must be org/name, each at most 96 letters, digits, '.', '_' and '-': %w", c.Repo, loader.ErrInvalid)
	}
	rev := c.Revision
	if rev == "" {
		rev = DefaultRevision
	}
	if err := checkRevision(rev); err != nil {
		return nil, fmt.Errorf("revision %q of hf://%s %w: %w", rev, c.Repo, err, loader.ErrInvalid)
	}
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ep, err := parseEndpoint(getenv(EnvEndpoint))
	if err != nil {
		return nil, err
	}
	s := &Source{repo: c.Repo, rev: rev, endpoint: ep, base: ep.String()}
	s.token, s.tokenVar = findToken(getenv)
	if strings.IndexFunc(s.token, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
		return nil, fmt.Errorf("the token in %s holds control characters: %w", s.tokenVar, loader.ErrInvalid)
	}
	base := c.HTTP
	if base == nil {
		if base, err = loader.NewHTTPClient(loader.HTTPOptions{}); err != nil {
			return nil, err
		}
	}
	client, probe := *base, *base
	client.CheckRedirect = s.checkRedirect
	probe.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(req.URL, s.endpoint) {
			return http.ErrUseLastResponse
		}
		return s.checkRedirect(req, via)
	}
	s.client, s.probe = &client, &probe
	return s, nil
}

// findToken returns the first token of TokenVars that is set (spaces
// trimmed), and its variable; empty when none is.
func findToken(getenv func(string) string) (token, variable string) {
	for _, v := range TokenVars {
		t := strings.TrimSpace(getenv(v))
		if t == "" || (v == GenericTokenVar && !strings.HasPrefix(t, hubTokenPrefix)) {
			continue
		}
		return t, v
	}
	return "", ""
}

// checkRevision applies what a git ref or commit may be, loosely: the URI
// parser is stricter.
func checkRevision(rev string) error {
	switch {
	case len(rev) > 255:
		return errors.New("is longer than 255 bytes")
	case !utf8.ValidString(rev):
		return errors.New("is not valid UTF-8")
	case strings.IndexFunc(rev, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) >= 0:
		return errors.New("must not contain spaces, control characters or backslashes")
	}
	for seg := range strings.SplitSeq(rev, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New("must not have empty, \".\" or \"..\" segments")
		}
	}
	return nil
}

// parseEndpoint reads HF_ENDPOINT as huggingface_hub does: a URL,
// trailing slashes removed.
func parseEndpoint(v string) (*url.URL, error) {
	if v == "" {
		v = DefaultEndpoint
	}
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(v), "/"))
	if err != nil {
		return nil, fmt.Errorf("HF_ENDPOINT is not a URL: %w", loader.ErrInvalid)
	}
	switch {
	case u.User != nil:
		return nil, fmt.Errorf("HF_ENDPOINT=%q must not hold credentials: put the token in HF_TOKEN: %w", u.Redacted(), loader.ErrInvalid)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.Opaque != "":
		return nil, fmt.Errorf("HF_ENDPOINT=%q must be an http or https URL: %w", u.Redacted(), loader.ErrInvalid)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("HF_ENDPOINT=%q must not have a query or fragment: %w", u.Redacted(), loader.ErrInvalid)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}

// sameOrigin reports whether u is on the endpoint's origin: the same
// scheme, host and port (default ports made explicit). A subdomain is
// another origin.
func sameOrigin(u, endpoint *url.URL) bool {
	return strings.EqualFold(u.Scheme, endpoint.Scheme) &&
		strings.EqualFold(u.Hostname(), endpoint.Hostname()) &&
		port(u) == port(endpoint)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// authorize sets the token on a request to the endpoint's origin and
// removes it from any other.
func (s *Source) authorize(req *http.Request) {
	if s.token != "" && sameOrigin(req.URL, s.endpoint) {
		req.Header.Set("Authorization", "Bearer "+s.token)
	} else {
		req.Header.Del("Authorization")
	}
}

var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", maxRedirects)

// checkRedirect follows at most maxRedirects redirects and decides the
// token for each hop: Go's client would forward it to another port of
// the same host, or to a subdomain (hf.co to cdn-lfs.hf.co).
func (s *Source) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return errTooManyRedirects
	}
	s.authorize(req)
	return nil
}

// uri is the model as the user wrote it, for messages.
func (s *Source) uri() string {
	if s.rev == DefaultRevision {
		return "hf://" + s.repo
	}
	return "hf://" + s.repo + "@" + s.rev
}

// get sends a request with the token where it belongs, through client.
func (s *Source) get(ctx context.Context, client *http.Client, method, u, what string, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, err, loader.ErrInvalid)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	s.authorize(req)
	resp, err := client.Do(req)
	if err != nil {
		// The URL of a redirect may be signed: say what was asked for
		// instead.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		err = fmt.Errorf("%s: %w", what, err)
		if ctx.Err() != nil || errors.Is(err, errTooManyRedirects) {
			return nil, err
		}
		return nil, loader.Retryable(err, 0)
	}
	return resp, nil
}

// escapePath escapes each segment of a slash-separated path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
