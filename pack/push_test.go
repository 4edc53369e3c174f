package pack

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/modelgate/modelgate/pack/packtest"
)

// newRegistry serves an in-process registry, through wrap when set, and
// returns its host:port.
func newRegistry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// anonymous pushes without credentials, whatever the test machine's
// Docker config holds.
var anonymous = PushOptions{Keychain: authn.NewMultiKeychain()}

func tagOf(t testing.TB, s string) name.Tag {
	t.Helper()
	tag, err := ParseImage(s, true)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func TestPackPush(t *testing.T) {
	var uploads atomic.Int64
	host := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/blobs/uploads/") {
				uploads.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	dir := t.TempDir()
	writeTree(t, dir, model())
	idx := build(t, dir, modelOptions())
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tag := tagOf(t, host+"/mirror/acme/tiny:main")

	var last, total atomic.Int64
	withProgress := anonymous
	withProgress.Progress = func(complete, n int64) { last.Store(complete); total.Store(n) }
	ref, err := Push(context.Background(), idx, tag, withProgress)
	if err != nil {
		t.Fatal(err)
	}
	if last.Load() == 0 || last.Load() != total.Load() {
		t.Errorf("progress ended at %d of %d bytes", last.Load(), total.Load())
	}
	if ref.String() != host+"/mirror/acme/tiny@"+want.String() {
		t.Errorf("Push returned %s, want the index digest %s", ref, want)
	}
	// Three layers and two configs, each uploaded once though both
	// manifests list the layers.
	if n := uploads.Load(); n != 5 {
		t.Errorf("%d blob uploads, want 5", n)
	}

	// What the registry serves, pulled by tag.
	pulled, err := remote.Index(tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pulled.Digest(); d != want {
		t.Errorf("the registry serves %s, want %s", d, want)
	}
	img, err := pulled.Image(mustManifests(t, idx)[1].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(digests(t, layersOf(t, firstImage(t, idx))), digests(t, layersOf(t, img))); diff != "" {
		t.Errorf("pulled arm64 layers (-want +got):\n%s", diff)
	}
	out := t.TempDir()
	for _, l := range layersOf(t, img) {
		if err := packtest.ExtractLayer(l, out); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(packtest.Tree(t, dir, ".modelgate"), packtest.Tree(t, out)); diff != "" {
		t.Errorf("pulled tree (-want +got):\n%s", diff)
	}

	// Again: the registry has every blob, nothing is uploaded.
	uploads.Store(0)
	again, err := Push(context.Background(), build(t, dir, modelOptions()), tag, anonymous)
	if err != nil {
		t.Fatal(err)
	}
	if again != ref || uploads.Load() != 0 {
		t.Errorf("second push: %s with %d uploads, want %s with none", again, uploads.Load(), ref)
	}
}

func mustManifests(t testing.TB, idx v1.ImageIndex) []v1.Descriptor {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	return im.Manifests
}

// TestPushNamesAMissingLayer: a registry that accepts a layer and then
// does not have it fails the push, naming the file the layer holds.
func TestPackPushNamesAMissingLayer(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, model())
	idx := build(t, dir, modelOptions())
	lost := digests(t, layersOf(t, firstImage(t, idx)))[1]
	host := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead && strings.HasSuffix(r.URL.Path, "/blobs/"+lost) {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	_, err := Push(context.Background(), idx, tagOf(t, host+"/models/tiny:v1"), anonymous)
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "layer 2 (.cache/huggingface/hub/models--acme--tiny/blobs/bbbb)") {
		t.Errorf("push to a registry losing a layer: %v, want %v naming layer 2 and its file", err, ErrMismatch)
	}
}

func TestPackVerifyRefusesAnotherIndex(t *testing.T) {
	host := newRegistry(t, nil)
	tag := tagOf(t, host+"/models/tiny:v1")
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, map[string]node{"x": {data: []byte("a")}})
	writeTree(t, b, map[string]node{"x": {data: []byte("b")}})
	if _, err := Push(context.Background(), build(t, a, Options{}), tag, anonymous); err != nil {
		t.Fatal(err)
	}
	other := build(t, b, Options{})
	_, err := Verify(context.Background(), other, tag, anonymous)
	od, _ := other.Digest()
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "not the index pushed, "+od.String()) {
		t.Errorf("Verify of another index: %v, want %v naming %s", err, ErrMismatch, od)
	}
}

func TestPackParseImage(t *testing.T) {
	cases := map[string]struct {
		in       string
		insecure bool
		want     string // the tag's name, or the error's text
		scheme   string
	}{
		"registry, repository and tag": {in: "registry.example.com/models/tiny:v1", want: "registry.example.com/models/tiny:v1", scheme: "https"},
		"insecure":                     {in: "registry.example.com/models/tiny:v1", insecure: true, want: "registry.example.com/models/tiny:v1", scheme: "http"},
		"a port":                       {in: "127.0.0.1:5000/tiny:v1", want: "127.0.0.1:5000/tiny:v1", scheme: "http"},
		"no tag":                       {in: "registry.example.com/tiny", want: `"registry.example.com/tiny" must be registry/repository:tag`},
		"no registry":                  {in: "acme/tiny:v1", want: `"acme/tiny:v1" must be registry/repository:tag, the registry a host with a dot or a port`},
		"a digest":                     {in: "registry.example.com/tiny@sha256:" + strings.Repeat("0", 64), want: "names a digest; name a tag (registry/repository:tag)"},
		"upper case":                   {in: "registry.example.com/Acme/Tiny:v1", want: `"registry.example.com/Acme/Tiny:v1" must be registry/repository:tag, the registry a host with a dot or a port (or localhost) and the repository lower-case`},
		"empty":                        {in: "", want: `"" must be registry/repository:tag`},
		"a URI":                        {in: "oci://registry.example.com/tiny:v1", want: `"oci://registry.example.com/tiny:v1" is a URI; write the image without its scheme`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tag, err := ParseImage(tc.in, tc.insecure)
			if tc.scheme == "" {
				if !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("ParseImage(%q): %v, want %v saying %q", tc.in, err, ErrBadImage, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tc.want, tc.scheme}, []string{tag.Name(), tag.Scheme()}); diff != "" {
				t.Errorf("ParseImage(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func FuzzPackParseImage(f *testing.F) {
	for _, s := range []string{"registry.example.com/models/tiny:v1", "127.0.0.1:5000/a/b:main", "localhost/x:y",
		"acme/tiny:v1", "r.io/x@sha256:00", "oci://r.io/x:v", "R.IO/X:v", "r.io/x:", ""} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, s string, insecure bool) {
		tag, err := ParseImage(s, insecure)
		if err != nil {
			if !errors.Is(err, ErrBadImage) {
				t.Errorf("ParseImage(%q): %v is not %v", s, err, ErrBadImage)
			}
			return
		}
		// What it accepts, written out, is the same tag.
		again, err := ParseImage(tag.Name(), insecure)
		if err != nil || again != tag {
			t.Errorf("ParseImage(%q) = %s, which parses to %v, %v", s, tag, again, err)
		}
	})
}
