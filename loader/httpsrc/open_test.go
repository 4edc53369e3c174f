package httpsrc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/loader"
)

// listed starts fs and lists its one file.
func listed(t *testing.T, fs *fileServer) (*Source, *loader.File) {
	t.Helper()
	src, err := New(Config{URL: fs.start(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l, err := src.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return src, &l.Files[0]
}

func read(src *Source, f *loader.File, off, n int64) ([]byte, error) {
	rc, err := src.Open(context.Background(), f, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestOpenRanges(t *testing.T) {
	data := testData(10000)
	tests := map[string]struct {
		server func(*fileServer)
		off, n int64
	}{
		"first byte":                {off: 0, n: 1},
		"whole file":                {off: 0, n: 10000},
		"middle":                    {off: 4096, n: 1000},
		"to the end":                {off: 9000, n: 1000},
		"last byte":                 {off: 9999, n: 1},
		"Last-Modified as If-Range": {server: func(s *fileServer) { s.etag = "" }, off: 1234, n: 4321},
		"no validator at all": {
			server: func(s *fileServer) { s.etag = ""; s.modified = time.Time{} },
			off:    5000, n: 10,
		},
		"sequential, whole file": {server: func(s *fileServer) { s.noRanges = true }, off: 0, n: 10000},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := newFileServer(data)
			if tc.server != nil {
				fs.set(tc.server)
			}
			src, f := listed(t, fs)
			got, err := read(src, f, tc.off, tc.n)
			if err != nil {
				t.Fatalf("Open(%d, %d): %v", tc.off, tc.n, err)
			}
			if want := data[tc.off : tc.off+tc.n]; !bytes.Equal(got, want) {
				t.Errorf("Open(%d, %d) read %d bytes that differ from the file's", tc.off, tc.n, len(got))
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	data := testData(1000)
	tests := map[string]struct {
		server func(*fileServer)
		// change is applied after List.
		change    func(*fileServer)
		off, n    int64
		wantKind  error
		transient bool
	}{
		"ETag changed between parts": {
			change: func(s *fileServer) { s.replace(testData(1000)[1:], `"v2"`) },
			off:    500, n: 100,
			wantKind: loader.ErrVerification,
		},
		"ETag changed, whole file asked": {
			change: func(s *fileServer) { s.replace(append(testData(999), 1), `"v2"`) },
			off:    0, n: 1000,
			wantKind: loader.ErrVerification,
		},
		"Last-Modified changed between parts": {
			server: func(s *fileServer) { s.etag = "" },
			change: func(s *fileServer) { s.replace(testData(1000), "") },
			off:    100, n: 100,
			wantKind: loader.ErrVerification,
		},
		"If-Range ignored, ETag changed": {
			change: func(s *fileServer) {
				s.replace(testData(1000), `"v2"`)
				s.get = func(w http.ResponseWriter, r *http.Request) {
					r.Header.Del("If-Range")
					w.Header().Set("ETag", `"v2"`)
					http.ServeContent(w, r, "", s.modified, bytes.NewReader(data))
				}
			},
			off: 100, n: 100,
			wantKind: loader.ErrVerification,
		},
		"file shorter now": {
			server: func(s *fileServer) { s.etag = "" },
			change: func(s *fileServer) {
				s.get = func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Range", "bytes */10")
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				}
			},
			off: 900, n: 100,
			wantKind: loader.ErrVerification,
		},
		"sequential file changed": {
			server: func(s *fileServer) { s.noRanges = true },
			change: func(s *fileServer) { s.replace(testData(1000), `"v2"`) },
			off:    0, n: 1000,
			wantKind: loader.ErrVerification,
		},
		"sequential file at an offset": {
			server: func(s *fileServer) { s.noRanges = true },
			off:    10, n: 990,
			wantKind: loader.ErrInvalid,
		},
		"range past the end": {off: 990, n: 11, wantKind: loader.ErrInvalid},
		"404":                {change: func(s *fileServer) { s.status = http.StatusNotFound }, off: 0, n: 10, wantKind: loader.ErrNotFound},
		"403":                {change: func(s *fileServer) { s.status = http.StatusForbidden }, off: 0, n: 10, wantKind: loader.ErrAccessDenied},
		"503":                {change: func(s *fileServer) { s.status = http.StatusServiceUnavailable }, off: 0, n: 10, transient: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := newFileServer(data)
			if tc.server != nil {
				fs.set(tc.server)
			}
			src, f := listed(t, fs)
			if tc.change != nil {
				fs.set(tc.change)
			}
			_, err := read(src, f, tc.off, tc.n)
			if err == nil {
				t.Fatalf("Open(%d, %d) succeeded, want an error", tc.off, tc.n)
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("Open error %q does not wrap %q", err, tc.wantKind)
			}
			if _, got := loader.IsTransient(err); got != tc.transient {
				t.Errorf("Open error %q: transient = %v, want %v", err, got, tc.transient)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open error %q shows the URL's query", err)
			}
		})
	}
}

// TestOpenCut checks that a body cut short is a transient failure.
func TestOpenCut(t *testing.T) {
	fs := newFileServer(testData(1000))
	src, f := listed(t, fs)
	fs.set(func(s *fileServer) {
		s.get = func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Range", "bytes 0-999/1000")
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write(testData(10))
			panic(http.ErrAbortHandler) // cut the connection
		}
	})
	_, err := read(src, f, 0, 1000)
	if _, ok := loader.IsTransient(err); !ok {
		t.Fatalf("reading a cut body: error %v, want a transient one", err)
	}
}
