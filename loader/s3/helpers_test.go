package s3

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/modelgate/modelgate/loader"
)

// Test credentials: fake, and checked never to appear in a message.
const (
	testKeyID  = "AKIDMODELGATETEST"
	testSecret = "s3cr3t-never-printed"
	testBucket = "models"
)

// store is a gofakes3 server in process, optionally wrapped by a handler
// that sees (and may answer) every request first.
type store struct {
	backend *s3mem.Backend
	srv     *httptest.Server

	mu   sync.Mutex
	reqs []*http.Request // every request, as received
}

type middleware func(next http.Handler) http.Handler

func newStore(t *testing.T, wrap middleware) *store { return startStore(t, wrap, false) }

func newTLSStore(t *testing.T, wrap middleware) *store { return startStore(t, wrap, true) }

func startStore(t *testing.T, wrap middleware, tls bool) *store {
	t.Helper()
	st := &store{backend: s3mem.New()}
	if err := st.backend.CreateBucket(testBucket); err != nil {
		t.Fatal(err)
	}
	h := gofakes3.New(st.backend).Server()
	if wrap != nil {
		h = wrap(h)
	}
	st.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		st.reqs = append(st.reqs, r.Clone(context.Background()))
		st.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	st.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	if tls {
		st.srv.StartTLS()
	} else {
		st.srv.Start()
	}
	t.Cleanup(st.srv.Close)
	return st
}

// put stores an object directly in the backend, with extra headers the
// store answers HEAD and GET with (checksums, encryption).
func (st *store) put(t *testing.T, key string, data []byte, headers map[string]string) {
	t.Helper()
	meta := map[string]string{"Last-Modified": time.Now().UTC().Format(http.TimeFormat)}
	for k, v := range headers {
		meta[http.CanonicalHeaderKey(k)] = v
	}
	if _, err := st.backend.PutObject(testBucket, key, meta, bytes.NewReader(data), int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
}

// requests returns the requests received so far.
func (st *store) requests() []*http.Request {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]*http.Request(nil), st.reqs...)
}

// env is the environment of a source using the store with static keys,
// with extra variables (an empty value unsets one).
func (st *store) env(extra map[string]string) func(string) string {
	m := map[string]string{
		"AWS_ENDPOINT_URL_S3":       st.srv.URL,
		"AWS_ACCESS_KEY_ID":         testKeyID,
		"AWS_SECRET_ACCESS_KEY":     testSecret,
		"AWS_EC2_METADATA_DISABLED": "true",
	}
	for k, v := range extra {
		m[k] = v
	}
	return envOf(m)
}

// source returns a Source for the store's bucket and prefix.
func (st *store) source(t *testing.T, prefix string, extra map[string]string) *Source {
	t.Helper()
	s, err := New(context.Background(), Config{Bucket: testBucket, Prefix: prefix, Getenv: st.env(extra), Conns: 4})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// caFile writes the TLS store's certificate as a PEM file.
func (st *store) caFile(t *testing.T) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: st.srv.Certificate().Raw})
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// listed is what a test compares of a listed file.
type listed struct {
	Path, Key string
	Size      int64
}

func summarize(l *loader.Listing) []listed {
	var out []listed
	for _, f := range l.Files {
		out = append(out, listed{Path: f.Path, Key: f.Key, Size: f.Size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// readRange opens and reads [off, off+n) of f.
func readRange(s *Source, f *loader.File, off, n int64) ([]byte, error) {
	rc, err := s.Open(context.Background(), f, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// file returns the listed file at path.
func file(t *testing.T, l *loader.Listing, path string) *loader.File {
	t.Helper()
	for i := range l.Files {
		if l.Files[i].Path == path {
			return &l.Files[i]
		}
	}
	t.Fatalf("no file %q in the listing %v", path, summarize(l))
	return nil
}

// s3Error answers like S3 does when it refuses a request.
func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>refused by the test</Message></Error>`, code)
}
