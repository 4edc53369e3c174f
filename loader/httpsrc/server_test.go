package httpsrc

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// secret is the signature in every test URL's query: no message may show
// it.
const secret = "S3CRET-SIGNATURE"

// fileServer serves one file with http.ServeContent (HEAD, ranges,
// If-Range), or as configured to misbehave.
type fileServer struct {
	mu       sync.Mutex
	data     []byte
	etag     string
	modified time.Time
	// noRanges serves the whole file to every GET, without Accept-Ranges.
	noRanges bool
	// headStatus answers HEAD with this status when not 0.
	headStatus int
	// headNoLength answers HEAD without Content-Length.
	headNoLength bool
	// status answers every request with this status when not 0.
	status int
	// getStatus answers every GET with this status when not 0.
	getStatus int
	// get, when set, serves GET requests.
	get http.HandlerFunc
	// header is added to every answer.
	header http.Header
	// gets counts GET requests.
	gets int
}

func newFileServer(data []byte) *fileServer {
	return &fileServer{data: data, etag: `"v1"`, modified: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// replace swaps the content for a new version; call it inside set.
func (s *fileServer) replace(data []byte, etag string) {
	s.data, s.etag, s.modified = data, etag, s.modified.Add(time.Hour)
}

func (s *fileServer) set(f func(s *fileServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *fileServer) getCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, etag, modified := s.data, s.etag, s.modified
	noRanges, headStatus, headNoLength, status := s.noRanges, s.headStatus, s.headNoLength, s.status
	if r.Method == http.MethodGet && s.getStatus != 0 {
		status = s.getStatus
	}
	get := s.get
	for k, v := range s.header {
		w.Header()[k] = v
	}
	if r.Method == http.MethodGet {
		s.gets++
	}
	s.mu.Unlock()

	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	switch {
	case status != 0:
		w.WriteHeader(status)
		return
	case r.Method == http.MethodHead && headStatus != 0:
		w.WriteHeader(headStatus)
		return
	case r.Method == http.MethodGet && get != nil:
		get(w, r)
		return
	case r.Method == http.MethodHead && headNoLength:
		w.Header().Set("Accept-Ranges", "bytes")
		w.WriteHeader(http.StatusOK)
		return
	case noRanges:
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		if !modified.IsZero() {
			w.Header().Set("Last-Modified", modified.Format(http.TimeFormat))
		}
		if r.Method != http.MethodHead {
			_, _ = w.Write(data)
		}
		return
	}
	http.ServeContent(w, r, "", modified, bytes.NewReader(data))
}

// start serves s; the URL names model.safetensors with a signed-looking
// query.
func (s *fileServer) start(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL + "/models/org/model.safetensors?X-Amz-Signature=" + secret
}

// testData is n bytes that differ at every offset that matters.
func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/256)
	}
	return b
}

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sumBase64(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}
