// Package hubtest is a fake Hugging Face Hub for tests and benchmarks. It
// serves the routes huggingface_hub reads a model with (a revision's
// info, the paginated tree, the resolve URLs) the way the Hub answers
// them: errors carry X-Error-Code, tokens decide what a private or gated
// repository shows, a renamed repository redirects to its new name, and
// LFS files are redirected with a signed URL to a second server, the CDN,
// on another origin. The CDN, like an object store behind a presigned
// URL, refuses a request that also carries an Authorization header: a
// client that leaks its Hub token there fails. Content is served from
// memory or generated, never copied whole per request.
//
// Counters and a record of the Authorization headers each route received
// let tests assert what a client sent where; faults (statuses, cut bodies)
// can be injected per route.
package hubtest

import (
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// Route names a kind of request, for counters, records and faults.
type Route string

// The routes the fake serves.
const (
	// RouteRevision is GET /api/models/{org}/{name}/revision/{rev}.
	RouteRevision Route = "revision"
	// RouteTree is GET /api/models/{org}/{name}/tree/{rev}[/{path}].
	RouteTree Route = "tree"
	// RouteResolve is GET or HEAD /{org}/{name}/resolve/{rev}/{path}.
	RouteResolve Route = "resolve"
	// RouteCDN is any request to the CDN server, where LFS content is.
	RouteCDN Route = "cdn"
	// RouteOther is any other request to the Hub.
	RouteOther Route = "other"
)

// DefaultPageSize is the number of tree entries per page unless
// WithPageSize says otherwise.
const DefaultPageSize = 1000

// Option configures a Server.
type Option func(*settings)

type settings struct {
	tls      bool
	host     string
	pageSize int
	tokens   []string
}

// WithTLS serves both the Hub and the CDN over HTTPS (and HTTP/2), with
// httptest's certificate: see Client and Certificate.
func WithTLS() Option { return func(s *settings) { s.tls = true } }

// WithHost serves both the Hub and the CDN on host (an address of this
// machine) instead of 127.0.0.1: one that containers in network
// namespaces of their own reach, such as a Pod bridge's gateway.
func WithHost(host string) Option { return func(s *settings) { s.host = host } }

// WithPageSize sets the number of tree entries per page (at least 1):
// small values exercise pagination.
func WithPageSize(n int) Option { return func(s *settings) { s.pageSize = max(n, 1) } }

// WithTokens adds valid tokens besides those repositories name: a valid
// token that no repository lists reads public repositories only. A
// token the server does not know is answered 401 "Invalid credentials in
// Authorization header".
func WithTokens(tokens ...string) Option {
	return func(s *settings) { s.tokens = append(s.tokens, tokens...) }
}

// Server is a running fake Hub and its CDN.
type Server struct {
	hub, cdn *httptest.Server
	pageSize int
	secret   []byte // signs CDN URLs

	bytesServed atomic.Int64
	limiter     atomic.Pointer[rate.Limiter]

	mu       sync.Mutex
	repos    map[string]*repo
	renamed  map[string]string // old id → new id
	tokens   map[string]bool
	blobs    map[string]*blob // LFS content by SHA-256, for the CDN
	faults   []*faultState
	requests map[Route]int
	auth     map[Route]map[string]int
}

// New starts a Hub and a CDN on loopback (or WithHost's address); Close
// stops them.
func New(opts ...Option) *Server {
	st := settings{pageSize: DefaultPageSize}
	for _, o := range opts {
		o(&st)
	}
	s := &Server{
		pageSize: st.pageSize,
		secret:   make([]byte, 32),
		repos:    map[string]*repo{},
		renamed:  map[string]string{},
		tokens:   map[string]bool{},
		blobs:    map[string]*blob{},
		requests: map[Route]int{},
		auth:     map[Route]map[string]int{},
	}
	_, _ = rand.Read(s.secret)
	for _, t := range st.tokens {
		s.tokens[t] = true
	}
	s.hub = start(http.HandlerFunc(s.serveHub), st)
	s.cdn = start(http.HandlerFunc(s.serveCDN), st)
	return s
}

func start(h http.Handler, st settings) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	if st.host != "" {
		l, err := net.Listen("tcp", net.JoinHostPort(st.host, "0"))
		if err != nil {
			panic(fmt.Sprintf("hubtest: listening on %s: %v", st.host, err))
		}
		_ = srv.Listener.Close()
		srv.Listener = l
	}
	if st.tls {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return srv
}

// URL is the Hub's base URL: what HF_ENDPOINT names.
func (s *Server) URL() string { return s.hub.URL }

// CDNURL is the CDN's base URL: another port on loopback, so another
// origin than the Hub's.
func (s *Server) CDNURL() string { return s.cdn.URL }

// Client is a client for both servers, trusting their certificate under
// WithTLS, with Go's default redirect policy. Benchmarks may prefer a
// loader.NewHTTPClient with Certificate in its CA bundle.
func (s *Server) Client() *http.Client { return s.hub.Client() }

// Certificate is the certificate both servers present, nil without
// WithTLS: a CA bundle for clients of their own.
func (s *Server) Certificate() *x509.Certificate { return s.hub.Certificate() }

// Close stops both servers.
func (s *Server) Close() {
	s.hub.Close()
	s.cdn.Close()
}

// Fault is what the server does to the next requests of a route instead
// of answering them normally.
type Fault struct {
	// Route selects the requests.
	Route Route
	// Skip lets this many requests of the route through first.
	Skip int
	// Times is the number of requests the fault applies to (at least 1).
	Times int
	// Status answers with this status (429, 500, 503, ...) and a JSON
	// error, with RetryAfter seconds in Retry-After when set.
	Status     int
	RetryAfter int
	// CutAfter, when Status is 0, answers normally but closes the
	// connection after this many bytes of the body.
	CutAfter int64
}

type faultState struct {
	Fault
	skip, left int
}

// Inject adds a fault. The first pending fault of a route decides each
// of its requests: skipped, faulted, or (when none) answered normally.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultState{Fault: f, skip: f.Skip, left: max(f.Times, 1)})
}

// SetRate limits the file content the Hub and the CDN send, all requests
// together, to bytesPerSecond; 0 lifts the limit. A test slows a download
// with it, to act in its middle.
func (s *Server) SetRate(bytesPerSecond int64) {
	if bytesPerSecond <= 0 {
		s.limiter.Store(nil)
		return
	}
	s.limiter.Store(rate.NewLimiter(rate.Limit(bytesPerSecond), limitedRead))
}

// BytesServed is the number of file content bytes sent so far, by the
// Hub and the CDN together.
func (s *Server) BytesServed() int64 { return s.bytesServed.Load() }

// Requests is the number of requests a route received.
func (s *Server) Requests(r Route) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[r]
}

// Authorizations counts the requests of a route by their Authorization
// header ("" for none): a CDN that never saw a token has only "".
func (s *Server) Authorizations(r Route) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.auth[r] {
		out[k] = v
	}
	return out
}

// ResetStats clears the counters, the records and the pending faults.
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.requests = map[Route]int{}
	s.auth = map[Route]map[string]int{}
}

// record counts a request and returns the fault to apply to it, if any.
func (s *Server) record(route Route, r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[route]++
	if s.auth[route] == nil {
		s.auth[route] = map[string]int{}
	}
	s.auth[route][r.Header.Get("Authorization")]++
	for i, f := range s.faults {
		if f.Route != route {
			continue
		}
		if f.skip > 0 {
			f.skip--
			return nil
		}
		f.left--
		if f.left <= 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		cp := f.Fault
		return &cp
	}
	return nil
}

// bearer reads the token of an Authorization header; ok is false when a
// header is there but is not a bearer token.
func bearer(r *http.Request) (token string, ok bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", true
	}
	scheme, tok, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}
