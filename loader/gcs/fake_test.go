package gcs

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/modelgate/modelgate/loader"
)

// fakeGCS is fake-gcs-server in process, behind a recorder of the
// requests and an optional interceptor.
type fakeGCS struct {
	srv *fakestorage.Server
	url string

	mu   sync.Mutex
	reqs []*http.Request
	// intercept, when set, may answer a request itself (returning true).
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeGCS(t *testing.T, objects ...fakestorage.Object) *fakeGCS {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{InitialObjects: objects, NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGCS{srv: srv}
	inner := srv.HTTPHandler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Clone(context.Background()))
		intercept := f.intercept
		f.mu.Unlock()
		if intercept != nil && intercept(w, r) {
			return
		}
		if ifGenerationMismatch(srv, r) {
			http.Error(w, `{"error":{"code":412,"message":"At least one of the pre-conditions you specified did not hold."}}`, http.StatusPreconditionFailed)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Stop)
	f.url = ts.URL
	return f
}

// ifGenerationMismatch does what fake-gcs-server v1.56.1 leaves out for
// downloads: a media GET whose ifGenerationMatch is not the object's live
// generation fails with 412, as GCS answers.
func ifGenerationMismatch(srv *fakestorage.Server, r *http.Request) bool {
	want := r.URL.Query().Get("ifGenerationMatch")
	if want == "" || r.URL.Query().Get("alt") != "media" {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/storage/v1/b/")
	if !ok {
		return false
	}
	bucket, name, ok := strings.Cut(rest, "/o/")
	if !ok {
		return false
	}
	bucket, err1 := url.PathUnescape(bucket)
	name, err2 := url.PathUnescape(name)
	if err1 != nil || err2 != nil {
		return false
	}
	obj, err := srv.GetObject(bucket, name)
	if err != nil {
		return false // the fake answers 404
	}
	return strconv.FormatInt(obj.Generation, 10) != want
}

// requests returns the requests seen so far.
func (f *fakeGCS) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

// authorizations returns the Authorization header of every request.
func (f *fakeGCS) authorizations() []string {
	var out []string
	for _, r := range f.requests() {
		out = append(out, r.Header.Get("Authorization"))
	}
	return out
}

func (f *fakeGCS) setIntercept(fn func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intercept = fn
}

// env is a Getenv over a map.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// emulated is a Source on f through STORAGE_EMULATOR_HOST.
func emulated(t *testing.T, f *fakeGCS, bucket, prefix string) *Source {
	t.Helper()
	s, err := New(t.Context(), Config{Bucket: bucket, Prefix: prefix, Getenv: env(map[string]string{"STORAGE_EMULATOR_HOST": f.url})})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stored(bucket, name, content string) fakestorage.Object {
	return fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: bucket, Name: name}, Content: []byte(content)}
}

// wantFile is the File List should return for a stored object, with
// digests computed here from its content.
func wantFile(t *testing.T, f *fakeGCS, bucket, name, path string) loader.File {
	t.Helper()
	obj, err := f.srv.GetObject(bucket, name)
	if err != nil {
		t.Fatal(err)
	}
	m := md5.Sum(obj.Content)
	return loader.File{
		Path: path,
		Size: int64(len(obj.Content)),
		Digests: []loader.Digest{
			{Algorithm: loader.MD5, Hex: hex.EncodeToString(m[:])},
			{Algorithm: loader.CRC32C, Hex: fmt.Sprintf("%08x", crc32.Checksum(obj.Content, crc32.MakeTable(crc32.Castagnoli)))},
		},
		Version: strconv.FormatInt(obj.Generation, 10),
		Key:     name,
	}
}

// readRange opens and reads [off, off+n) of f.
func readRange(t *testing.T, s *Source, f *loader.File, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Open(t.Context(), f, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(rc)
}
