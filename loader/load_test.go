package loader_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

const mib = 1 << 20

// model is a small multi-file model: a part-sized file, files spanning
// several parts, nested paths and an empty file.
func model() map[string]loadertest.Content {
	return map[string]loadertest.Content{
		"config.json":                      loadertest.Bytes([]byte(`{"architectures":["LlamaForCausalLM"]}`)),
		"model-00001-of-00002.safetensors": loadertest.Generated(1, 5*mib+123),
		"model-00002-of-00002.safetensors": loadertest.Generated(2, 3*mib),
		"tokenizer/tokenizer.json":         loadertest.Generated(3, 200_000),
		"empty.txt":                        loadertest.Bytes(nil),
	}
}

// fastOptions are options for tests: small parts, short timeouts.
func fastOptions(dest, uri string) loader.Options {
	return loader.Options{
		Dest: dest, URI: uri, Concurrency: 4, PartSize: mib, StallTimeout: 500 * time.Millisecond,
		Retry:         loader.RetryPolicy{Attempts: 6, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxRetryAfter: 2 * time.Second},
		TakeoverAfter: time.Second, PollEvery: 20 * time.Millisecond, Host: "test-pod",
	}
}

// sums is every regular file under dir (links followed, the state
// directory left out) with its SHA-256.
func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == loader.StateDir || rel == ".cache") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func want(files map[string]loadertest.Content) map[string]string {
	out := map[string]string{}
	for p, c := range files {
		out[p] = c.SHA256()
	}
	return out
}

func readManifest(t *testing.T, dest string) *loader.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dest, loader.StateDir, loader.ManifestFile))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var m loader.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func TestLoadPlain(t *testing.T) {
	files := model()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	dest := t.TempDir()
	res, err := loader.Load(context.Background(), srv.Source(nil), fastOptions(dest, "https://example/model"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(files), sums(t, dest)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	var total int64
	for _, c := range files {
		total += c.Size()
	}
	if res.Files != len(files) || res.Bytes != total || res.Fetched != total || res.CacheHit || res.Verified != len(files) {
		t.Errorf("result = %+v, want %d files, %d bytes fetched once, every digest verified", res, len(files), total)
	}
	m := readManifest(t, dest)
	if m.URI != "https://example/model" || m.Layout != loader.LayoutPlain || len(m.Files) != len(files) || m.Bytes != total {
		t.Errorf("manifest = %+v", m)
	}
	for _, f := range m.Files {
		if f.Digests[0].Algorithm != loader.SHA256 || f.Digests[0].Hex != files[f.Path].SHA256() {
			t.Errorf("manifest digest of %s = %v, want sha256 %s", f.Path, f.Digests, files[f.Path].SHA256())
		}
	}
	left, _ := os.ReadDir(filepath.Join(dest, loader.StateDir))
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{loader.ManifestFile}, names); diff != "" {
		t.Errorf("state directory after a load (-want +got):\n%s", diff)
	}
}

// failing is a source that fails every call: a cache hit must not call it.
type failing struct{}

func (failing) List(context.Context) (*loader.Listing, error) { return nil, errors.New("listed") }
func (failing) Open(context.Context, *loader.File, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("opened")
}

func TestCacheHit(t *testing.T) {
	srv := loadertest.NewServer(model())
	defer srv.Close()
	dest := t.TempDir()
	o := fastOptions(dest, "s3://bucket/model")
	if _, err := loader.Load(context.Background(), srv.Source(nil), o); err != nil {
		t.Fatal(err)
	}
	res, err := loader.Load(context.Background(), failing{}, o)
	if err != nil {
		t.Fatalf("second load: %v", err)
	}
	if !res.CacheHit || res.Fetched != 0 || res.Files != len(model()) {
		t.Errorf("second load = %+v, want a cache hit with every file", res)
	}

	// A file removed behind the loader's back: not a hit any more.
	if err := os.Remove(filepath.Join(dest, "config.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := loader.Load(context.Background(), failing{}, o); err == nil || !strings.Contains(err.Error(), "listed") {
		t.Errorf("load with a file missing = %v, want the source listed again", err)
	}
}

func TestOtherURIReplacesModel(t *testing.T) {
	a := loadertest.NewServer(map[string]loadertest.Content{"a.bin": loadertest.Generated(1, 1000), "shared.json": loadertest.Bytes([]byte("{}"))})
	defer a.Close()
	b := loadertest.NewServer(map[string]loadertest.Content{"b.bin": loadertest.Generated(2, 1000), "shared.json": loadertest.Bytes([]byte(`{"b":1}`))})
	defer b.Close()
	dest := t.TempDir()
	if _, err := loader.Load(context.Background(), a.Source(nil), fastOptions(dest, "gs://a/m")); err != nil {
		t.Fatal(err)
	}
	if _, err := loader.Load(context.Background(), b.Source(nil), fastOptions(dest, "gs://b/m")); err != nil {
		t.Fatal(err)
	}
	wantFiles := want(map[string]loadertest.Content{"b.bin": loadertest.Generated(2, 1000), "shared.json": loadertest.Bytes([]byte(`{"b":1}`))})
	if diff := cmp.Diff(wantFiles, sums(t, dest)); diff != "" {
		t.Errorf("after loading another URI (-want +got):\n%s", diff)
	}
}

func TestFaults(t *testing.T) {
	const file = "model-00001-of-00002.safetensors"
	size := model()[file].Size()
	tests := map[string]struct {
		faults []loadertest.Fault
		// maxExtra bounds the bytes served beyond the model's size.
		maxExtra int64
		kind     error
	}{
		"connection cut mid-body, three times": {
			faults:   []loadertest.Fault{{Path: file, Times: 3, CutAfter: 300_000}},
			maxExtra: 0,
		},
		"a stall": {
			faults:   []loadertest.Fault{{Path: file, Times: 1, CutAfter: 100_000, Stall: 1500 * time.Millisecond}},
			maxExtra: 0,
		},
		"a burst of 500s": {
			faults: []loadertest.Fault{{Times: 4, Status: 500}},
		},
		"429 with Retry-After": {
			faults: []loadertest.Fault{{Path: file, Times: 1, Status: 429, RetryAfter: 1}},
		},
		"a corrupted byte, once: the file is fetched again": {
			faults:   []loadertest.Fault{{Path: file, Times: 1, Corrupt: true, CorruptAt: 2*mib + 17}},
			maxExtra: size,
		},
		"a corrupted byte, always": {
			faults: []loadertest.Fault{{Path: file, Corrupt: true, CorruptAt: 17}},
			kind:   loader.ErrVerification,
		},
		"a file gone": {
			faults: []loadertest.Fault{{Path: file, Status: 404}},
			kind:   loader.ErrNotFound,
		},
		"access denied": {
			faults: []loadertest.Fault{{Path: file, Status: 403}},
			kind:   loader.ErrAccessDenied,
		},
		"500s that never end": {
			faults: []loadertest.Fault{{Path: file, Status: 503}},
		},
	}
	// Each fault under a SHA-256 (read back and hashed) and a CRC64NVME
	// (summed per part as it arrives, combined): a corrupted byte fails
	// both ways.
	for _, digest := range []loader.Algorithm{loader.SHA256, loader.CRC64NVME} {
		for name, tc := range tests {
			t.Run(string(digest)+"/"+name, func(t *testing.T) { fault(t, digest, name, tc.faults, tc.maxExtra, tc.kind) })
		}
	}
}

func fault(t *testing.T, digest loader.Algorithm, name string, faults []loadertest.Fault, maxExtra int64, kind error) {
	files := model()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	for _, f := range faults {
		srv.Inject(f)
	}
	dest := t.TempDir()
	src := srv.Source(nil)
	src.Digest = digest
	_, err := loader.Load(context.Background(), src, fastOptions(dest, "https://x/m"))
	if name == "500s that never end" {
		var tr *loader.Transient
		if !errors.As(err, &tr) || !strings.Contains(err.Error(), "after 6 attempts") {
			t.Fatalf("error = %v, want the transient failure after every attempt", err)
		}
		assertIncomplete(t, dest)
		return
	}
	if kind != nil {
		if !errors.Is(err, kind) {
			t.Fatalf("error = %v, want %v", err, kind)
		}
		assertIncomplete(t, dest)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(files), sums(t, dest)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	var total int64
	for _, c := range files {
		total += c.Size()
	}
	if extra := srv.BytesServed() - total; extra > maxExtra {
		t.Errorf("served %d bytes beyond the model's %d, want at most %d", extra, total, maxExtra)
	}
}

// assertIncomplete checks that a failed load left no manifest and nothing
// at a final path.
func assertIncomplete(t *testing.T, dest string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dest, loader.StateDir, loader.ManifestFile)); !os.IsNotExist(err) {
		t.Errorf("a failed load left a manifest (%v)", err)
	}
	if got := sums(t, dest); len(got) != 0 {
		t.Errorf("a failed load left files at their final paths: %v", keys(got))
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
