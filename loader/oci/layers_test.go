package oci

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/modelgate/modelgate/loader"
)

// layer is a descriptor of mediaType with content named by seed.
func layer(mediaType, seed string, ann ...string) ocispec.Descriptor {
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromString(seed), Size: int64(len(seed))}
	if len(ann) > 0 {
		d.Annotations = map[string]string{}
		for i := 0; i+1 < len(ann); i += 2 {
			d.Annotations[ann[i]] = ann[i+1]
		}
	}
	return d
}

func kit(t *testing.T, cfg string) *kitCursor {
	t.Helper()
	k, err := parseKitConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestLayerFiles(t *testing.T) {
	type placed struct {
		Path   string
		Unpack loader.Archive
	}
	kitModel := layer("application/vnd.kitops.modelkit.model.v1.tar", "model")
	kitCode := layer("application/vnd.kitops.modelkit.code.v1.tar+gzip", "code")
	cases := map[string]struct {
		layers  []ocispec.Descriptor
		kit     string // a ModelKit config, when set
		want    []placed
		wantErr string
	}{
		"modelpack raw layers at their filepath": {
			layers: []ocispec.Descriptor{
				layer("application/vnd.cncf.model.weight.v1.raw", "w", annotationFilepath, "model-00001.safetensors"),
				layer("application/vnd.cncf.model.weight.config.v1.raw", "c", annotationFilepath, "config.json"),
				layer("application/vnd.cncf.model.doc.v1.raw", "d", annotationFilepath, "docs/README.md"),
				layer("application/vnd.cncf.model.code.v1.raw", "p", annotationFilepath, "modeling.py"),
				layer("application/vnd.cncf.model.dataset.v1.raw", "s", annotationFilepath, "data/eval.jsonl"),
			},
			want: []placed{{"model-00001.safetensors", ""}, {"config.json", ""}, {"docs/README.md", ""}, {"modeling.py", ""}, {"data/eval.jsonl", ""}},
		},
		"modelpack tar layers extract at the root": {
			layers: []ocispec.Descriptor{
				layer("application/vnd.cncf.model.weight.v1.tar", "w", annotationFilepath, "weights/a.bin"),
				layer("application/vnd.cncf.model.weight.v1.tar+gzip", "g"),
				layer("application/vnd.cncf.model.dataset.v1.tar+zstd", "z", annotationFilepath, "data"),
			},
			want: []placed{{"", loader.ArchiveTar}, {"", loader.ArchiveTarGzip}, {"", loader.ArchiveTarZstd}},
		},
		"legacy cnai types and annotation": {
			layers: []ocispec.Descriptor{
				layer("application/vnd.cnai.model.weight.v1.raw", "w", annotationFilepathLegacy, "model.bin"),
				layer("application/vnd.cnai.model.doc.v1.tar", "d", annotationFilepathLegacy, "LICENSE"),
			},
			want: []placed{{"model.bin", ""}, {"", loader.ArchiveTar}},
		},
		"modelpack raw layer named by title": {
			layers: []ocispec.Descriptor{layer("application/vnd.cncf.model.weight.v1.raw", "w", ocispec.AnnotationTitle, "w.bin")},
			want:   []placed{{"w.bin", ""}},
		},
		"modelpack raw layer without a path": {
			layers:  []ocispec.Descriptor{layer("application/vnd.cncf.model.weight.v1.raw", "w")},
			wantErr: "has no org.cncf.model.filepath annotation",
		},
		"modelpack unknown kind": {
			layers:  []ocispec.Descriptor{layer("application/vnd.cncf.model.tokenizer.v1.raw", "w", annotationFilepath, "t.json")},
			wantErr: `"application/vnd.cncf.model.tokenizer.v1.raw"`,
		},
		"kitops current: root": {
			layers: []ocispec.Descriptor{kitModel, kitCode},
			kit: `{"model":{"path":"models/m.gguf","digest":"` + kitModel.Digest.String() + `"},
				"code":[{"path":"src","digest":"` + kitCode.Digest.String() + `"}]}`,
			want: []placed{{"", loader.ArchiveTar}, {"", loader.ArchiveTarGzip}},
		},
		"kitops before layer digests: the path's directory": {
			layers: []ocispec.Descriptor{kitModel, kitCode},
			kit:    `{"model":{"path":"models/m.gguf"},"code":[{"path":"src/lib"}]}`,
			want:   []placed{{"models", loader.ArchiveTar}, {"src", loader.ArchiveTarGzip}},
		},
		"kitops without a config": {
			layers: []ocispec.Descriptor{kitModel},
			want:   []placed{{"", loader.ArchiveTar}},
		},
		"kitops digest differs": {
			layers:  []ocispec.Descriptor{kitModel},
			kit:     `{"model":{"path":"m.gguf","digest":"` + kitCode.Digest.String() + `"}}`,
			wantErr: "the manifest's layer differs",
		},
		"kitops layer missing from config": {
			layers:  []ocispec.Descriptor{kitModel, kitCode},
			kit:     `{"model":{"path":"m.gguf"}}`,
			wantErr: "lists 0 code entries",
		},
		"kitops path escapes": {
			layers:  []ocispec.Descriptor{kitModel},
			kit:     `{"model":{"path":"../up/m.gguf"}}`,
			wantErr: `".."`,
		},
		"oras push: title, whatever the type": {
			layers: []ocispec.Descriptor{
				layer(ocispec.MediaTypeImageLayer, "f", ocispec.AnnotationTitle, "model.gguf"),
				layer("application/octet-stream", "o", ocispec.AnnotationTitle, "sub/tokenizer.json"),
			},
			want: []placed{{"model.gguf", ""}, {"sub/tokenizer.json", ""}},
		},
		"oras push: a directory": {
			layers: []ocispec.Descriptor{layer("application/vnd.example.dir", "d", ocispec.AnnotationTitle, "weights", annotationOrasUnpack, "true")},
			want:   []placed{{"", loader.ArchiveTarGzip}},
		},
		"image layers": {
			layers: []ocispec.Descriptor{
				layer(ocispec.MediaTypeImageLayer, "a"),
				layer(ocispec.MediaTypeImageLayerGzip, "b"),
				layer(ocispec.MediaTypeImageLayerZstd, "c"),
				layer("application/vnd.docker.image.rootfs.diff.tar.gzip", "d"),
			},
			want: []placed{{"", loader.ArchiveTar}, {"", loader.ArchiveTarGzip}, {"", loader.ArchiveTarZstd}, {"", loader.ArchiveTarGzip}},
		},
		"a repeated image layer extracts once": {
			layers: []ocispec.Descriptor{
				layer(ocispec.MediaTypeImageLayerGzip, "a"),
				layer(ocispec.MediaTypeImageLayerGzip, "b"),
				layer(ocispec.MediaTypeImageLayerGzip, "a"),
			},
			want: []placed{{"", loader.ArchiveTarGzip}, {"", loader.ArchiveTarGzip}},
		},
		"foreign layer": {
			layers:  []ocispec.Descriptor{layer("application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", "f")},
			wantErr: `"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"`,
		},
		"same path twice": {
			layers: []ocispec.Descriptor{
				layer("application/vnd.cncf.model.weight.v1.raw", "a", annotationFilepath, "w.bin"),
				layer("application/vnd.cncf.model.weight.v1.tar", "b", annotationFilepath, "w.bin"),
			},
			wantErr: `both hold "w.bin"`,
		},
		"path outside the model": {
			layers:  []ocispec.Descriptor{layer("application/vnd.cncf.model.weight.v1.raw", "a", annotationFilepath, "/etc/passwd")},
			wantErr: "must be relative",
		},
		"sha512 layer": {
			layers:  []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.SHA512.FromString("x"), Size: 1}},
			wantErr: "is not sha256",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var k *kitCursor
			if tc.kit != "" {
				k = kit(t, tc.kit)
			}
			files, err := layerFiles(tc.layers, k)
			if tc.wantErr != "" {
				if !errors.Is(err, loader.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("layerFiles error = %v, want %v containing %q", err, loader.ErrInvalid, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("layerFiles: %v", err)
			}
			var got []placed
			for i, f := range files {
				got = append(got, placed{f.Path, f.Unpack})
				l := tc.layers[i] // files follow the layers, a repeat aside
				wantMeta := fileOf(l, f.Path, f.Unpack)
				if diff := cmp.Diff(wantMeta, f); diff != "" {
					t.Errorf("file %d (-want +got):\n%s", i, diff)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placement (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPickManifest(t *testing.T) {
	plat := func(os, arch string, ann ...string) ocispec.Descriptor {
		d := layer(ocispec.MediaTypeImageManifest, os+arch, ann...)
		d.Platform = &ocispec.Platform{OS: os, Architecture: arch}
		return d
	}
	noPlatform := layer(ocispec.MediaTypeImageManifest, "only")
	attestation := plat("unknown", "unknown", "vnd.docker.reference.type", "attestation-manifest")
	cases := map[string]struct {
		list    []ocispec.Descriptor
		want    digest.Digest
		wantErr string
	}{
		"this platform":              {list: []ocispec.Descriptor{plat("linux", "arm64"), plat("linux", "amd64")}, want: plat("linux", "amd64").Digest},
		"the only one, any platform": {list: []ocispec.Descriptor{plat("linux", "s390x")}, want: plat("linux", "s390x").Digest},
		"the only one, no platform":  {list: []ocispec.Descriptor{noPlatform}, want: noPlatform.Digest},
		"attestations aside":         {list: []ocispec.Descriptor{plat("linux", "s390x"), attestation}, want: plat("linux", "s390x").Digest},
		"none for this platform": {
			list:    []ocispec.Descriptor{plat("linux", "arm64"), plat("windows", "amd64"), noPlatform},
			wantErr: "no manifest for linux/amd64, only for (no platform), linux/arm64, windows/amd64",
		},
		"empty": {wantErr: "lists no manifests"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := pickManifest(tc.list, "linux", "amd64")
			if tc.wantErr != "" {
				if !errors.Is(err, loader.ErrNotFound) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("pickManifest error = %v, want %v containing %q", err, loader.ErrNotFound, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("pickManifest: %v", err)
			}
			if diff := cmp.Diff(tc.want, got.Digest); diff != "" {
				t.Errorf("pickManifest (-want +got):\n%s", diff)
			}
		})
	}
}
