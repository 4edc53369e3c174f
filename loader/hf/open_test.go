package hf

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
)

// TestOpenRanges reads exact ranges of regular files (served by the Hub)
// and LFS files (redirected to the CDN, another port of the same host:
// an origin Go's client would forward the token to by itself).
func TestOpenRanges(t *testing.T) {
	files := []hubtest.File{configJSON, tokenizer, weights, shard}
	ranges := map[string]func(size int64) (off, n int64){
		"whole":          func(size int64) (int64, int64) { return 0, size },
		"first byte":     func(int64) (int64, int64) { return 0, 1 },
		"start":          func(size int64) (int64, int64) { return 1, min(size-1, 99) },
		"middle":         func(size int64) (int64, int64) { return size / 3, size / 3 },
		"last byte":      func(size int64) (int64, int64) { return size - 1, 1 },
		"tail":           func(size int64) (int64, int64) { return size / 2, size - size/2 },
		"across a chunk": func(size int64) (int64, int64) { return min(size-2, 256<<10-7), min(2, size-min(size-2, 256<<10-7)) },
	}
	for name, opts := range map[string][]hubtest.Option{"http": nil, "https": {hubtest.WithTLS()}} {
		t.Run(name, func(t *testing.T) {
			hub := newHub(t, opts...)
			repo := hubtest.OneCommit(files...)
			repo.Private, repo.Tokens = true, []string{secretToken}
			hub.AddRepo("org/model", repo)
			s := newSource(t, hub, "org/model", "", map[string]string{"HF_TOKEN": secretToken})
			l, err := s.List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			opens, lfsOpens := 0, 0
			for _, hf := range files {
				want := bytesOf(t, hf)
				f := fileByPath(t, l, hf.Path)
				for rname, r := range ranges {
					off, n := r(f.Size)
					got, err := readRange(context.Background(), s, f, off, n)
					if err != nil {
						t.Fatalf("%s %s [%d, +%d): %v", hf.Path, rname, off, n, err)
					}
					if !bytes.Equal(got, want[off:off+n]) {
						t.Errorf("%s %s [%d, +%d): got %d bytes that differ from the content", hf.Path, rname, off, n, len(got))
					}
					opens++
					if hf.LFS {
						lfsOpens++
					}
				}
			}
			bearer := "Bearer " + secretToken
			want := map[hubtest.Route]map[string]int{
				hubtest.RouteRevision: {bearer: 1},
				hubtest.RouteTree:     {bearer: 1},
				hubtest.RouteResolve:  {bearer: opens},
				hubtest.RouteCDN:      {"": lfsOpens},
			}
			got := map[hubtest.Route]map[string]int{}
			for r := range want {
				got[r] = hub.Authorizations(r)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Authorization headers received (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRenamed follows the Hub's 307 from a repository's old name to its
// new one, with the token (the same origin).
func TestRenamed(t *testing.T) {
	hub := newHub(t)
	repo := hubtest.OneCommit(configJSON, weights)
	repo.Private, repo.Tokens = true, []string{secretToken}
	hub.AddRepo("old-org/model", repo)
	hub.Rename("old-org/model", "new-org/model")
	s := newSource(t, hub, "old-org/model", "", map[string]string{"HF_TOKEN": secretToken})
	l, err := s.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if diff := cmp.Diff([]loader.File{listed(t, configJSON), listed(t, weights)}, l.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&loader.HFRepo{ID: "old-org/model", Ref: "main", Commit: repo.Refs["main"]}, l.HF); diff != "" {
		t.Errorf("HF (-want +got):\n%s", diff)
	}
	for _, hf := range []hubtest.File{configJSON, weights} {
		f := fileByPath(t, l, hf.Path)
		got, err := readRange(context.Background(), s, f, 1, f.Size-1)
		if err != nil {
			t.Fatalf("%s: %v", hf.Path, err)
		}
		if want := bytesOf(t, hf)[1:]; !bytes.Equal(got, want) {
			t.Errorf("%s: read bytes differ from the content", hf.Path)
		}
	}
	// Each request went to the old name, then to the new one.
	if diff := cmp.Diff(map[string]int{"Bearer " + secretToken: 2}, hub.Authorizations(hubtest.RouteRevision)); diff != "" {
		t.Errorf("revision requests' Authorization (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"Bearer " + secretToken: 4}, hub.Authorizations(hubtest.RouteResolve)); diff != "" {
		t.Errorf("resolve requests' Authorization (-want +got):\n%s", diff)
	}
}

func TestOpenErrors(t *testing.T) {
	missing := loader.File{Path: "gone.bin", Key: "gone.bin", Size: 10}
	tests := map[string]struct {
		fault *hubtest.Fault
		file  *loader.File
		// wantKind is the sentinel the error wraps.
		wantKind       error
		wantTransient  bool
		wantRetryAfter time.Duration
		wantMsg        []string
	}{
		"rate limited": {fault: &hubtest.Fault{Route: hubtest.RouteResolve, Status: 429, RetryAfter: 3},
			wantTransient: true, wantRetryAfter: 3 * time.Second, wantMsg: []string{"hf://org/model: model.safetensors", "429"}},
		"CDN unavailable": {fault: &hubtest.Fault{Route: hubtest.RouteCDN, Status: 503},
			wantTransient: true, wantMsg: []string{"hf://org/model: model.safetensors", "503"}},
		"body cut": {fault: &hubtest.Fault{Route: hubtest.RouteCDN, CutAfter: 1000},
			wantTransient: true},
		"missing file": {file: &missing, wantKind: loader.ErrNotFound,
			wantMsg: []string{"hf://org/model: gone.bin", "HTTP 404", `no file "gone.bin"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hub := newHub(t, hubtest.WithTokens(secretToken))
			hub.AddRepo("org/model", hubtest.OneCommit(configJSON, weights))
			s := newSource(t, hub, "org/model", "", map[string]string{"HF_TOKEN": secretToken})
			l, err := s.List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			f := fileByPath(t, l, weights.Path)
			if tc.file != nil {
				f = tc.file
			}
			if tc.fault != nil {
				hub.Inject(*tc.fault)
			}
			_, err = readRange(context.Background(), s, f, 0, f.Size)
			if err == nil {
				t.Fatalf("reading %s succeeded, want an error", f.Path)
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("error %q does not wrap %v", err, tc.wantKind)
			}
			after, transient := loader.IsTransient(err)
			if transient != tc.wantTransient || after != tc.wantRetryAfter {
				t.Errorf("error %q: transient %t after %s, want %t after %s", err, transient, after, tc.wantTransient, tc.wantRetryAfter)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if strings.Contains(err.Error(), secretToken) || strings.Contains(err.Error(), "Signature") {
				t.Errorf("error %q shows the token or a signed URL", err)
			}
		})
	}
}

func TestOpenBeforeList(t *testing.T) {
	hub := newHub(t)
	s := newSource(t, hub, "org/model", "", nil)
	if _, err := s.Open(context.Background(), &loader.File{Path: "a", Key: "a", Size: 1}, 0, 1); err == nil {
		t.Fatal("Open before List succeeded")
	}
}

// TestRedirectLimit stops a redirect loop, as a failure not worth
// retrying.
func TestRedirectLimit(t *testing.T) {
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	s, err := New(Config{Repo: "org/model", Getenv: func(k string) string { return map[string]string{"HF_ENDPOINT": srv.URL}[k] }, HTTP: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.List(context.Background())
	if err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Fatalf("List error = %v, want one saying it stopped after 10 redirects", err)
	}
	if _, transient := loader.IsTransient(err); transient {
		t.Errorf("List error %q is transient", err)
	}
	if requests != maxRedirects+1 {
		t.Errorf("server saw %d requests, want %d", requests, maxRedirects+1)
	}
}

// TestLoad loads a repository with the loader, which verifies every file
// against the digests the listing vouched for and lays out the hub cache.
func TestLoad(t *testing.T) {
	hub := newHub(t, hubtest.WithPageSize(3))
	files := []hubtest.File{configJSON, readme, tokenizer, weights, shard}
	hub.AddRepo("org/model", hubtest.OneCommit(files...))
	s := newSource(t, hub, "org/model", "", nil)
	dest := t.TempDir()
	res, err := loader.Load(context.Background(), s, loader.Options{Dest: dest, URI: "hf://org/model", Concurrency: 4, PartSize: 64 << 10, Host: "test"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if res.Verified != len(files) || res.Layout != loader.LayoutHFCache {
		t.Errorf("Load verified %d files in layout %q, want %d in %q", res.Verified, res.Layout, len(files), loader.LayoutHFCache)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dest, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bytesOf(t, f)) {
			t.Errorf("%s: loaded bytes differ from the content", f.Path)
		}
	}
}
