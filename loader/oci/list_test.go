package oci

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	mathrand "math/rand"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/modelgate/modelgate/loader"
)

// randomBytes is n deterministic bytes.
func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// modelPack pushes a ModelPack model as modctl would: raw weights and
// config with filepath annotations, and a tar+gzip docs layer, tagged v1.
func modelPack(t *testing.T, p *pusher) (digest.Digest, []ocispec.Descriptor, []byte) {
	t.Helper()
	weights := randomBytes(300<<10, 1)
	layers := []ocispec.Descriptor{
		p.blob("application/vnd.cncf.model.weight.v1.raw", weights, map[string]string{annotationFilepath: "model.safetensors"}),
		p.blob("application/vnd.cncf.model.weight.config.v1.raw", []byte(`{"arch":"llama"}`), map[string]string{annotationFilepath: "config.json"}),
		p.blob("application/vnd.cncf.model.doc.v1.tar+gzip", gzipOf(t, tarOf(t, "docs/README.md", "# model")), map[string]string{annotationFilepath: "docs/README.md"}),
	}
	cfg := p.blob("application/vnd.cncf.model.config.v1+json", []byte(`{"descriptor":{"name":"m"}}`), nil)
	return p.artifact("application/vnd.cncf.model.manifest.v1+json", &cfg, layers, "v1"), layers, weights
}

// ggcrImage is a container image of a tar layer made with tarball and a
// random one.
func ggcrImage(t *testing.T, seed int64) v1.Image {
	t.Helper()
	tb := tarOf(t, "app/model.bin", strings.Repeat("x", int(seed)))
	l1, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb)), nil })
	if err != nil {
		t.Fatal(err)
	}
	l2, err := random.Layer(2048, types.DockerLayer, random.WithSource(mathrand.NewSource(seed)))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l1, l2)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// imageFiles is what List gives for img.
func imageFiles(t *testing.T, img v1.Image) []loader.File {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	var files []loader.File
	for _, l := range m.Layers {
		d := ocispec.Descriptor{Digest: digest.Digest(l.Digest.String()), Size: l.Size}
		files = append(files, fileOf(d, "", loader.ArchiveTarGzip))
	}
	return files
}

func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

func TestList(t *testing.T) {
	r := newTestRegistry(t)

	mp := r.pusher(t, "org/modelpack")
	mpDigest, mpLayers, _ := modelPack(t, mp)
	mpFiles := []loader.File{
		fileOf(mpLayers[0], "model.safetensors", ""),
		fileOf(mpLayers[1], "config.json", ""),
		fileOf(mpLayers[2], "", loader.ArchiveTarGzip),
	}

	op := r.pusher(t, "org/oras")
	orasLayers := []ocispec.Descriptor{
		op.blob(ocispec.MediaTypeImageLayer, []byte("gguf weights"), map[string]string{ocispec.AnnotationTitle: "weights/model.gguf"}),
		op.blob("text/markdown", []byte("# readme"), map[string]string{ocispec.AnnotationTitle: "README.md"}),
		op.blob(ocispec.MediaTypeImageLayerGzip, gzipOf(t, tarOf(t, "extra/a.txt", "a")),
			map[string]string{ocispec.AnnotationTitle: "extra", annotationOrasUnpack: "true"}),
	}
	orasDigest := op.artifact("application/vnd.example.model", nil, orasLayers, "v1")

	kp := r.pusher(t, "org/kit")
	kitLayers := []ocispec.Descriptor{
		kp.blob("application/vnd.kitops.modelkit.model.v1.tar", tarOf(t, "models/m.gguf", "gguf"), nil),
		kp.blob("application/vnd.kitops.modelkit.docs.v1.tar+gzip", gzipOf(t, tarOf(t, "README.md", "docs")), nil),
	}
	kitCfg, _ := json.Marshal(map[string]any{
		"manifestVersion": "1.0.0",
		"model":           map[string]string{"path": "models/m.gguf", "digest": kitLayers[0].Digest.String()},
		"docs":            []map[string]string{{"path": "README.md", "digest": kitLayers[1].Digest.String()}},
	})
	kc := kp.blob(mediaTypeKitConfig, kitCfg, nil)
	kitDigest := kp.artifact("", &kc, kitLayers, "v1")

	ip := r.pusher(t, "org/image")
	img := ggcrImage(t, 3)
	imgDigest := ip.image(img, "v1")

	xp := r.pusher(t, "org/multi")
	here, there := ggcrImage(t, 5), ggcrImage(t, 7)
	xp.image(here, "")
	xp.image(there, "")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: there, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch()}}},
		mutate.IndexAddendum{Add: here, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	rawIdx, _ := idx.RawManifest()
	idxDigest := xp.manifest(ocispec.MediaTypeImageIndex, rawIdx, "v1")
	foreign := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: there, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch()}}},
		mutate.IndexAddendum{Add: here, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "windows", Architecture: runtime.GOARCH}}},
	)
	rawForeign, _ := foreign.RawManifest()
	xp.manifest(ocispec.MediaTypeImageIndex, rawForeign, "foreign")

	bp := r.pusher(t, "org/bad")
	bp.artifact("application/vnd.example", nil, []ocispec.Descriptor{bp.blob("application/x-unknown", []byte("?"), nil)}, "unknown")
	bp.artifact("application/vnd.example", nil, []ocispec.Descriptor{
		bp.blob("application/vnd.cncf.model.weight.v1.raw", []byte("a"), map[string]string{annotationFilepath: "w.bin"}),
		bp.blob("application/octet-stream", []byte("b"), map[string]string{ocispec.AnnotationTitle: "w.bin"}),
	}, "twice")

	cases := map[string]struct {
		repo, tag, digest string
		want              *loader.Listing
		wantErr           error
		wantMsg           string
	}{
		"modelpack by tag": {
			repo: "org/modelpack", tag: "v1",
			want: &loader.Listing{Revision: mpDigest.String(), Files: mpFiles},
		},
		"modelpack by digest": {
			repo: "org/modelpack", digest: mpDigest.String(),
			want: &loader.Listing{Revision: mpDigest.String(), Files: mpFiles},
		},
		"oras push titles": {
			repo: "org/oras", tag: "v1",
			want: &loader.Listing{Revision: orasDigest.String(), Files: []loader.File{
				fileOf(orasLayers[0], "weights/model.gguf", ""),
				fileOf(orasLayers[1], "README.md", ""),
				fileOf(orasLayers[2], "", loader.ArchiveTarGzip),
			}},
		},
		"kitops modelkit": {
			repo: "org/kit", tag: "v1",
			want: &loader.Listing{Revision: kitDigest.String(), Files: []loader.File{
				fileOf(kitLayers[0], "", loader.ArchiveTar),
				fileOf(kitLayers[1], "", loader.ArchiveTarGzip),
			}},
		},
		"image layers": {
			repo: "org/image", tag: "v1",
			want: &loader.Listing{Revision: imgDigest.String(), Files: imageFiles(t, img)},
		},
		"index picks linux/GOARCH": {
			repo: "org/multi", tag: "v1",
			want: &loader.Listing{Revision: idxDigest.String(), Files: imageFiles(t, here)},
		},
		"index without this platform": {
			repo: "org/multi", tag: "foreign", wantErr: loader.ErrNotFound,
			wantMsg: "no manifest for linux/" + runtime.GOARCH + ", only for linux/" + otherArch() + ", windows/" + runtime.GOARCH,
		},
		"missing tag": {
			repo: "org/modelpack", tag: "v2", wantErr: loader.ErrNotFound, wantMsg: r.host + "/org/modelpack:v2",
		},
		"missing repository": {
			repo: "org/nothing", tag: "v1", wantErr: loader.ErrNotFound, wantMsg: r.host + "/org/nothing:v1",
		},
		"missing digest": {
			repo: "org/modelpack", digest: digest.FromString("none").String(), wantErr: loader.ErrNotFound,
			wantMsg: "org/modelpack@" + digest.FromString("none").String(),
		},
		"unknown layer media type": {
			repo: "org/bad", tag: "unknown", wantErr: loader.ErrInvalid, wantMsg: `"application/x-unknown"`,
		},
		"two layers, one path": {
			repo: "org/bad", tag: "twice", wantErr: loader.ErrInvalid, wantMsg: `both hold "w.bin"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.source(t, tc.repo, tc.tag, tc.digest, nil).List(context.Background())
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("List error = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
		})
	}
}
