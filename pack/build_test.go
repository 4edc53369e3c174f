package pack

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/modelgate/modelgate/pack/packtest"
)

// threshold is the tests' layer threshold: small, so that large files
// stay small.
const threshold = 4 << 10

// model is a tree laid out as the loader lays out an hf:// model: blobs,
// snapshot links, refs and the plain view at the top.
func model() map[string]node {
	const hub = ".cache/huggingface/hub/models--acme--tiny"
	const snap = hub + "/snapshots/0123456789abcdef0123456789abcdef01234567"
	return map[string]node{
		hub + "/blobs/aaaa":                  {size: 3 * threshold, seed: 1},
		hub + "/blobs/bbbb":                  {size: threshold, seed: 2},
		hub + "/blobs/cccc":                  {data: []byte(`{"model_type":"llama"}`)},
		hub + "/refs/main":                   {data: []byte("0123456789abcdef0123456789abcdef01234567")},
		snap + "/model-00001.safetensors":    {link: "../../blobs/aaaa"},
		snap + "/model-00002.safetensors":    {link: "../../blobs/bbbb"},
		snap + "/config.json":                {link: "../../blobs/cccc"},
		"model-00001.safetensors":            {link: snap + "/model-00001.safetensors"},
		"model-00002.safetensors":            {link: snap + "/model-00002.safetensors"},
		"config.json":                        {link: snap + "/config.json"},
		"run.sh":                             {data: []byte("#!/bin/sh\n"), mode: 0o755},
		"empty":                              {dir: true},
		"dangling":                           {link: "nowhere"},
		".modelgate/manifest.json":           {data: []byte(`{}`)},
		".modelgate/partial/aaaa":            {size: 2 * threshold, seed: 3},
		strings.Repeat("long-name-", 12):     {data: []byte("a name of more than 100 bytes")},
		"sub/" + strings.Repeat("deep/", 30): {dir: true},
	}
}

// modelOptions are the options `modelgate pack` passes, with the tests'
// threshold.
func modelOptions() Options {
	return Options{LayerThreshold: threshold, Exclude: []string{".modelgate"},
		Model: Model{URI: "hf://acme/tiny@main", HFRepo: "acme/tiny", HFCommit: "0123456789abcdef0123456789abcdef01234567"}}
}

func TestPackBuildIsReproducible(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, model())
	// The same content with other modes, times and the other order of
	// creation: none of it is in the image.
	other := model()
	for n, nd := range other {
		if !nd.dir && nd.link == "" && nd.mode == 0 {
			nd.mode = 0o600
			other[n] = nd
		}
	}
	writeTree(t, b, other)
	old := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	if err := filepath.WalkDir(b, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, old, old)
	}); err != nil {
		t.Fatal(err)
	}

	want, err := build(t, a, modelOptions()).Digest()
	if err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"same directory": a, "copy with other modes and times": b} {
		got, err := build(t, dir, modelOptions()).Digest()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: index digest %s, want %s", name, got, want)
		}
	}
}

func TestPackBuildChangesOnlyTheChangedLayer(t *testing.T) {
	const blobs = ".cache/huggingface/hub/models--acme--tiny/blobs/"
	cases := map[string]struct {
		change func(t *testing.T, dir string)
		// want is which layers change: the files of 3, 1 and 1
		// thresholds, then the small files.
		want []bool
	}{
		"a large file's content": {
			change: func(t *testing.T, dir string) {
				writeTree(t, dir, map[string]node{blobs + "aaaa": {size: 3 * threshold, seed: 99}})
			},
			want: []bool{true, false, false, false},
		},
		"the other large file's mode": {
			change: func(t *testing.T, dir string) {
				if err := os.Chmod(filepath.Join(dir, blobs+"bbbb"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: []bool{false, true, false, false},
		},
		"a small file": {
			change: func(t *testing.T, dir string) {
				writeTree(t, dir, map[string]node{"run.sh": {data: []byte("#!/bin/sh\nexit 0\n"), mode: 0o755}})
			},
			want: []bool{false, false, false, true},
		},
		"a link's target": {
			change: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "dangling")); err != nil {
					t.Fatal(err)
				}
				writeTree(t, dir, map[string]node{"dangling": {link: "elsewhere"}})
			},
			want: []bool{false, false, false, true},
		},
		"times only": {
			change: func(t *testing.T, dir string) {
				now := time.Now().Add(time.Hour)
				if err := os.Chtimes(filepath.Join(dir, blobs+"aaaa"), now, now); err != nil {
					t.Fatal(err)
				}
			},
			want: []bool{false, false, false, false},
		},
		"the loader's state": {
			change: func(t *testing.T, dir string) {
				writeTree(t, dir, map[string]node{".modelgate/partial/aaaa": {size: threshold, seed: 7}})
			},
			want: []bool{false, false, false, false},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			nodes := model()
			nodes["weights/extra.bin"] = node{size: threshold + 1, seed: 5}
			writeTree(t, dir, nodes)
			before := build(t, dir, modelOptions())
			tc.change(t, dir)
			after := build(t, dir, modelOptions())

			b, a := digests(t, layersOf(t, firstImage(t, before))), digests(t, layersOf(t, firstImage(t, after)))
			if len(a) != len(b) {
				t.Fatalf("%d layers, then %d", len(b), len(a))
			}
			var got []bool
			for i := range b {
				got = append(got, a[i] != b[i])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("layers changed (-want +got):\n%s", diff)
			}
			bd, _ := before.Digest()
			ad, _ := after.Digest()
			if changed := ad != bd; changed != slices.Contains(tc.want, true) {
				t.Errorf("index digest %s, then %s", bd, ad)
			}
		})
	}
}

// entryNames are a layer's entries as "name" for a file, "name/" for a
// directory and "name -> target" for a link.
func entryNames(t *testing.T, l v1.Layer) []string {
	t.Helper()
	var out []string
	for _, h := range headers(t, l) {
		switch h.Typeflag {
		case tar.TypeSymlink:
			out = append(out, h.Name+" -> "+h.Linkname)
		default:
			out = append(out, h.Name)
		}
	}
	return out
}

func TestPackBuildLayers(t *testing.T) {
	cases := map[string]struct {
		nodes   map[string]node
		exclude []string
		want    [][]string
	}{
		"small files share one layer": {
			nodes: map[string]node{"a.json": {data: []byte("{}")}, "b/c.txt": {data: []byte("c")}, "b/d": {size: threshold - 1}},
			want:  [][]string{{"a.json", "b/", "b/c.txt", "b/d"}},
		},
		"a file of the threshold has its own layer, with its parents": {
			nodes: map[string]node{"a.json": {data: []byte("{}")}, "x/y/big": {size: threshold}},
			want:  [][]string{{"x/", "x/y/", "x/y/big"}, {"a.json", "x/", "x/y/"}},
		},
		"large files in sorted order, then the rest": {
			nodes: map[string]node{"z": {size: threshold}, "a": {size: 2 * threshold}, "m/n": {size: threshold}, "m/s": {data: []byte("s")}},
			want:  [][]string{{"a"}, {"m/", "m/n"}, {"z"}, {"m/", "m/s"}},
		},
		"links stay links in the last layer, even to large files": {
			nodes: map[string]node{"blob": {size: threshold}, "d/link": {link: "../blob"}, "abs": {link: "/etc/hostname"}},
			want:  [][]string{{"blob"}, {"abs -> /etc/hostname", "d/", "d/link -> ../blob"}},
		},
		"only large files: no last layer": {
			nodes: map[string]node{"a": {size: threshold}, "b": {size: threshold}},
			want:  [][]string{{"a"}, {"b"}},
		},
		"empty directories are kept": {
			nodes: map[string]node{"e/f": {dir: true}, "g": {data: []byte("g")}},
			want:  [][]string{{"e/", "e/f/", "g"}},
		},
		"excluded paths are left out": {
			nodes:   map[string]node{".modelgate/manifest.json": {data: []byte("{}")}, ".modelgate/big": {size: threshold}, "keep": {data: []byte("k")}, ".modelgate-not": {data: []byte("n")}},
			exclude: []string{".modelgate"},
			want:    [][]string{{".modelgate-not", "keep"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, tc.nodes)
			idx := build(t, dir, Options{LayerThreshold: threshold, Exclude: tc.exclude})
			var got [][]string
			for _, l := range layersOf(t, firstImage(t, idx)) {
				got = append(got, entryNames(t, l))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("layers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPackBuildTarHeaders(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, model())
	type hdr struct {
		Type     byte
		Mode     int64
		Size     int64
		Linkname string
	}
	want := map[string]hdr{
		"run.sh":                         {Type: tar.TypeReg, Mode: 0o755, Size: 10},
		"empty/":                         {Type: tar.TypeDir, Mode: 0o755},
		"dangling":                       {Type: tar.TypeSymlink, Mode: 0o777, Linkname: "nowhere"},
		strings.Repeat("long-name-", 12): {Type: tar.TypeReg, Mode: 0o644, Size: 29},
		".cache/huggingface/hub/models--acme--tiny/blobs/aaaa": {Type: tar.TypeReg, Mode: 0o644, Size: 3 * threshold},
	}
	got := map[string]hdr{}
	for _, l := range layersOf(t, firstImage(t, build(t, dir, modelOptions()))) {
		for _, h := range headers(t, l) {
			// What every entry has.
			if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" ||
				!h.ModTime.Equal(time.Unix(0, 0)) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() ||
				h.Devmajor != 0 || h.Devminor != 0 {
				t.Errorf("%s: owner %d:%d (%q:%q), times %v %v %v, device %d:%d",
					h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, h.AccessTime, h.ChangeTime, h.Devmajor, h.Devminor)
			}
			if h.Format != tar.FormatUSTAR && h.Format != tar.FormatPAX {
				t.Errorf("%s: format %v, want USTAR or PAX", h.Name, h.Format)
			}
			for k := range h.PAXRecords {
				if k != "path" && k != "linkpath" && k != "size" {
					t.Errorf("%s: PAX record %q", h.Name, k)
				}
			}
			if _, ok := want[h.Name]; ok {
				got[h.Name] = hdr{Type: h.Typeflag, Mode: h.Mode, Size: h.Size, Linkname: h.Linkname}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

func TestPackBuildExtractsToTheSameTree(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, model())
	want := packtest.Tree(t, dir, ".modelgate")
	idx := build(t, dir, modelOptions())
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		ls := layersOf(t, img)
		// In order, every layer onto the one directory: the image.
		out := t.TempDir()
		for i, l := range ls {
			if err := packtest.ExtractLayer(l, out); err != nil {
				t.Fatalf("%s layer %d: %v", d.Platform, i+1, err)
			}
		}
		if diff := cmp.Diff(want, packtest.Tree(t, out)); diff != "" {
			t.Errorf("%s: extracted tree (-want +got):\n%s", d.Platform, diff)
		}
		// Each layer alone: it carries its files' parents.
		for i, l := range ls {
			if err := packtest.ExtractLayer(l, t.TempDir()); err != nil {
				t.Errorf("%s layer %d alone: %v", d.Platform, i+1, err)
			}
		}
	}
}

func TestPackBuildIndex(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, model())
	idx := build(t, dir, modelOptions())
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	type manifest struct {
		Platform    string
		MediaType   string
		Config      string
		LayerTypes  []string
		Layers      []string
		Annotations map[string]string
	}
	wantAnn := map[string]string{
		AnnotationSource: "hf://acme/tiny@main", AnnotationModelURI: "hf://acme/tiny@main",
		AnnotationHFRepo: "acme/tiny", AnnotationHFCommit: "0123456789abcdef0123456789abcdef01234567",
	}
	if diff := cmp.Diff(wantAnn, im.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
	if string(im.MediaType) != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("index media type %q", im.MediaType)
	}
	var got []manifest
	var layers []string
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := img.RawConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		g := manifest{Platform: d.Platform.String(), MediaType: string(m.MediaType), Config: string(m.Config.MediaType), Annotations: m.Annotations}
		for _, l := range m.Layers {
			g.LayerTypes = append(g.LayerTypes, string(l.MediaType))
		}
		layers = digests(t, layersOf(t, img))
		g.Layers = layers
		got = append(got, g)
		for _, banned := range []string{`"created"`, `"history"`, `"author"`} {
			if strings.Contains(string(raw), banned) {
				t.Errorf("%s config has %s: %s", d.Platform, banned, raw)
			}
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != d.Platform.String() {
			t.Errorf("config says %s/%s, the index %s", cf.OS, cf.Architecture, d.Platform)
		}
	}
	tarType := "application/vnd.oci.image.layer.v1.tar"
	want := []manifest{
		{Platform: "linux/amd64", MediaType: "application/vnd.oci.image.manifest.v1+json", Config: "application/vnd.oci.image.config.v1+json",
			LayerTypes: []string{tarType, tarType, tarType}, Layers: layers, Annotations: wantAnn},
		{Platform: "linux/arm64", MediaType: "application/vnd.oci.image.manifest.v1+json", Config: "application/vnd.oci.image.config.v1+json",
			LayerTypes: []string{tarType, tarType, tarType}, Layers: layers, Annotations: wantAnn},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("manifests (-want +got):\n%s", diff)
	}
}

// TestLayerStreamIsTheHashedOne keeps the hashing pass and the stream a
// push reads equal: the same bytes, of the digest and size announced.
func TestPackLayerStreamIsTheHashedOne(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, model())
	for i, l := range layersOf(t, firstImage(t, build(t, dir, modelOptions()))) {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		h, n, err := v1.SHA256(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		d, _ := l.Digest()
		size, _ := l.Size()
		if h != d || n != size {
			t.Errorf("layer %d streams %s of %d bytes, announced %s of %d", i+1, h, n, d, size)
		}
	}
}

func TestPackLayerStreamRefusesAChangedFile(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{"big": {size: threshold, seed: 1}})
	l := layersOf(t, firstImage(t, build(t, dir, Options{LayerThreshold: threshold})))[0]
	writeTree(t, dir, map[string]node{"big": {size: threshold + 1, seed: 1}})
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, _, err := v1.SHA256(rc); !errors.Is(err, errChanged) || !strings.Contains(err.Error(), "big") {
		t.Errorf("reading a layer whose file grew: %v, want %v naming big", err, errChanged)
	}
}

func TestPackBuildErrors(t *testing.T) {
	cases := map[string]struct {
		setup func(t *testing.T) string
		o     Options
		want  string
		is    error
	}{
		"no directory": {
			setup: func(t *testing.T) string { return filepath.Join(t.TempDir(), "missing") },
			want:  "no such file or directory",
			is:    os.ErrNotExist,
		},
		"a file, not a directory": {
			setup: func(t *testing.T) string {
				p := filepath.Join(t.TempDir(), "f")
				writeTree(t, filepath.Dir(p), map[string]node{"f": {data: []byte("x")}})
				return p
			},
			want: "is not a directory",
		},
		"nothing but the excluded": {
			setup: func(t *testing.T) string {
				dir := t.TempDir()
				writeTree(t, dir, map[string]node{".modelgate/manifest.json": {data: []byte("{}")}})
				return dir
			},
			o:    Options{Exclude: []string{".modelgate"}},
			want: "nothing to pack",
			is:   ErrEmpty,
		},
		"a named pipe": {
			setup: func(t *testing.T) string {
				dir := t.TempDir()
				if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
					t.Skip("no named pipes here:", err)
				}
				return dir
			},
			want: "pipe is a named pipe: only regular files, directories and symbolic links can be packed",
		},
		"a negative threshold": {
			setup: func(t *testing.T) string { return t.TempDir() },
			o:     Options{LayerThreshold: -1},
			want:  "the layer threshold -1 must not be negative",
		},
		"an exclusion outside": {
			setup: func(t *testing.T) string { return t.TempDir() },
			o:     Options{Exclude: []string{"../x"}},
			want:  `excluded path "../x" must be relative to the directory and inside it`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Build(context.Background(), tc.setup(t), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

func TestPackBuildStopsWhenCancelled(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{"big": {size: threshold, seed: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, dir, Options{LayerThreshold: threshold}); !errors.Is(err, context.Canceled) {
		t.Errorf("Build with a cancelled context: %v, want %v", err, context.Canceled)
	}
}

func TestPackBuildLeavesOptionsAsTheyWere(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{"a": {data: []byte("a")}})
	exclude := []string{"./x/"}
	build(t, dir, Options{Exclude: exclude})
	if diff := cmp.Diff([]string{"./x/"}, exclude); diff != "" {
		t.Errorf("Exclude after Build (-want +got):\n%s", diff)
	}
}

func TestPackBuildFollowsALinkToTheDirectory(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]node{"real/a": {data: []byte("a")}, "link": {link: "real"}})
	want, _ := build(t, filepath.Join(dir, "real"), Options{}).Digest()
	got, _ := build(t, filepath.Join(dir, "link"), Options{}).Digest()
	if got != want {
		t.Errorf("through a link: %s, want %s", got, want)
	}
}
