package httpsrc

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

func TestList(t *testing.T) {
	data := testData(1000)
	sum := sumHex(data)
	const modified = "Sat, 01 Mar 2025 12:00:00 GMT"
	file := func(f func(*loader.File)) loader.File {
		out := loader.File{Path: "model.safetensors", Size: 1000, Version: `"v1"`, Key: "", Sequential: false}
		if f != nil {
			f(&out)
		}
		return out
	}
	withSum := func(f *loader.File) { f.Digests = []loader.Digest{{Algorithm: loader.SHA256, Hex: sum}} }
	tests := map[string]struct {
		server       func(*fileServer)
		sha256       string
		wantFile     loader.File
		wantRevision string
	}{
		"ranges": {
			wantFile:     file(nil),
			wantRevision: "v1",
		},
		"given sha256": {
			sha256:       sum,
			wantFile:     file(withSum),
			wantRevision: "sha256:" + sum,
		},
		"no range support": {
			server:       func(s *fileServer) { s.noRanges = true },
			wantFile:     file(func(f *loader.File) { f.Sequential = true }),
			wantRevision: "v1",
		},
		"HEAD refused with 405": {
			server:       func(s *fileServer) { s.headStatus = http.StatusMethodNotAllowed },
			wantFile:     file(nil),
			wantRevision: "v1",
		},
		"HEAD refused with 501, no ranges": {
			server:       func(s *fileServer) { s.headStatus = http.StatusNotImplemented; s.noRanges = true },
			wantFile:     file(func(f *loader.File) { f.Sequential = true }),
			wantRevision: "v1",
		},
		"HEAD forbidden to a URL presigned for GET": {
			server:       func(s *fileServer) { s.headStatus = http.StatusForbidden },
			wantFile:     file(nil),
			wantRevision: "v1",
		},
		"HEAD without length": {
			server:       func(s *fileServer) { s.headNoLength = true },
			wantFile:     file(nil),
			wantRevision: "v1",
		},
		"Last-Modified without ETag": {
			server:   func(s *fileServer) { s.etag = "" },
			wantFile: file(func(f *loader.File) { f.Version = modified }),
		},
		"weak ETag is not a version": {
			server:   func(s *fileServer) { s.etag = `W/"v1"` },
			wantFile: file(func(f *loader.File) { f.Version = modified }),
		},
		"Repr-Digest agrees with the given sha256": {
			server: func(s *fileServer) {
				s.header = http.Header{"Repr-Digest": {"sha-512=:AAAA:, sha-256=:" + sumBase64(data) + ":"}}
			},
			sha256:       sum,
			wantFile:     file(withSum),
			wantRevision: "sha256:" + sum,
		},
		"Repr-Digest alone": {
			server:       func(s *fileServer) { s.header = http.Header{"Repr-Digest": {"sha-256=:" + sumBase64(data) + ":"}} },
			wantFile:     file(withSum),
			wantRevision: "sha256:" + sum,
		},
		"Digest (RFC 3230)": {
			server: func(s *fileServer) {
				s.header = http.Header{"Digest": {"MD5=HUXZLQLMuI/KZ5KDcJPcOA==,SHA-256=" + sumBase64(data)}}
			},
			sha256:       sum,
			wantFile:     file(withSum),
			wantRevision: "sha256:" + sum,
		},
		"empty file, HEAD refused": {
			server:       func(s *fileServer) { s.data = nil; s.headStatus = http.StatusMethodNotAllowed },
			wantFile:     file(func(f *loader.File) { f.Size = 0; f.Sequential = true }), // ServeContent answers 200
			wantRevision: "v1",
		},
		"empty file, first byte answered 416": {
			server: func(s *fileServer) {
				s.headStatus = http.StatusMethodNotAllowed
				s.get = func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("ETag", `"v1"`)
					w.Header().Set("Content-Range", "bytes */0")
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				}
			},
			wantFile:     file(func(f *loader.File) { f.Size = 0 }),
			wantRevision: "v1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := newFileServer(data)
			if tc.server != nil {
				fs.set(tc.server)
			}
			u := fs.start(t)
			src, err := New(Config{URL: u, SHA256: tc.sha256})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got, err := src.List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			want := &loader.Listing{Revision: tc.wantRevision, Files: []loader.File{tc.wantFile}}
			want.Files[0].Key = strings.TrimSuffix(u, "?X-Amz-Signature="+secret)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListErrors(t *testing.T) {
	data := testData(100)
	sum := sumHex(data)
	other := sumHex([]byte("another file"))
	tests := map[string]struct {
		server    func(*fileServer)
		sha256    string
		wantKind  error
		transient bool
		// fetched says a GET may be sent: digests are compared before.
		fetched bool
	}{
		"404": {server: func(s *fileServer) { s.status = http.StatusNotFound }, wantKind: loader.ErrNotFound},
		"410": {server: func(s *fileServer) { s.status = http.StatusGone }, wantKind: loader.ErrNotFound},
		"401": {server: func(s *fileServer) { s.status = http.StatusUnauthorized }, wantKind: loader.ErrAccessDenied},
		"403": {server: func(s *fileServer) { s.status = http.StatusForbidden }, wantKind: loader.ErrAccessDenied, fetched: true},
		"503": {server: func(s *fileServer) { s.status = http.StatusServiceUnavailable }, transient: true},
		"429": {server: func(s *fileServer) { s.status = http.StatusTooManyRequests }, transient: true},
		"503 after a refused HEAD": {
			server: func(s *fileServer) {
				s.headStatus = http.StatusMethodNotAllowed
				s.getStatus = http.StatusServiceUnavailable
			},
			transient: true,
			fetched:   true,
		},
		"Repr-Digest differs from the given sha256": {
			server: func(s *fileServer) {
				s.header = http.Header{"Repr-Digest": {"sha-256=:" + sumBase64([]byte("another file")) + ":"}}
			},
			sha256:   sum,
			wantKind: loader.ErrVerification,
		},
		"Digest differs from the given sha256": {
			server: func(s *fileServer) {
				s.header = http.Header{"Digest": {"sha-256=" + sumBase64([]byte("another file"))}}
			},
			sha256:   sum,
			wantKind: loader.ErrVerification,
		},
		"Repr-Digest differs from Digest": {
			server: func(s *fileServer) {
				s.header = http.Header{"Repr-Digest": {"sha-256=:" + sumBase64(data) + ":"}, "Digest": {"sha-256=" + sumBase64([]byte("another file"))}}
			},
			wantKind: loader.ErrVerification,
		},
		"Repr-Digest not base64": {
			server:   func(s *fileServer) { s.header = http.Header{"Repr-Digest": {"sha-256=:" + other + ":"}} }, // hex, 48 bytes as base64
			wantKind: loader.ErrVerification,
		},
		"Repr-Digest without colons": {
			server:   func(s *fileServer) { s.header = http.Header{"Repr-Digest": {"sha-256=" + sumBase64(data)}} },
			wantKind: loader.ErrVerification,
		},
		"no size at all": {
			server: func(s *fileServer) {
				s.headNoLength = true
				s.get = func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Range", "bytes 0-0/*")
					w.WriteHeader(http.StatusPartialContent)
					_, _ = w.Write([]byte{0})
				}
			},
			wantKind: loader.ErrVerification,
			fetched:  true,
		},
		"first byte refused": {
			server: func(s *fileServer) {
				s.headNoLength = true
				s.get = func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Content-Range", "bytes */100")
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				}
			},
			fetched: true,
		},
		"no Content-Length on a whole answer": {
			server: func(s *fileServer) {
				s.headStatus = http.StatusMethodNotAllowed
				s.get = func(w http.ResponseWriter, _ *http.Request) {
					w.WriteHeader(http.StatusOK)
					w.(http.Flusher).Flush() // chunked: no length
					_, _ = w.Write(data)
				}
			},
			fetched: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fs := newFileServer(data)
			fs.set(tc.server)
			src, err := New(Config{URL: fs.start(t), SHA256: tc.sha256})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			_, err = src.List(context.Background())
			if err == nil {
				t.Fatal("List succeeded, want an error")
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("List error %q does not wrap %q", err, tc.wantKind)
			}
			if _, got := loader.IsTransient(err); got != tc.transient {
				t.Errorf("List error %q: transient = %v, want %v", err, got, tc.transient)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("List error %q shows the URL's query", err)
			}
			if n := fs.getCount(); n > 0 && !tc.fetched {
				t.Errorf("List sent %d GET requests, want none", n)
			}
		})
	}
}
