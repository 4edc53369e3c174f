package pack

import (
	"bytes"
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// config is the image configuration Build writes: the platform and the
// layers, nothing else (no creation time, no history, no command: the
// image is only ever mounted).
type config struct {
	Architecture string   `json:"architecture"`
	OS           string   `json:"os"`
	Variant      string   `json:"variant,omitempty"`
	RootFS       rootFS   `json:"rootfs"`
	Config       struct{} `json:"config"`
}

type rootFS struct {
	Type    string    `json:"type"`
	DiffIDs []v1.Hash `json:"diff_ids"`
}

// image is one platform's image over the shared layers.
type image struct {
	config   []byte
	manifest []byte
	layers   []*layer
}

var _ v1.Image = (*image)(nil)

// newImage makes the image of layers for platform p.
func newImage(p v1.Platform, layers []*layer, annotations map[string]string) (*image, error) {
	c := config{Architecture: p.Architecture, OS: p.OS, Variant: p.Variant, RootFS: rootFS{Type: "layers", DiffIDs: []v1.Hash{}}}
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Annotations: annotations}
	for _, l := range layers {
		c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, l.digest)
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCIUncompressedLayer, Size: l.size, Digest: l.digest})
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	m.Config, err = descriptor(types.OCIConfigJSON, raw)
	if err != nil {
		return nil, err
	}
	manifest, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &image{config: raw, manifest: manifest, layers: layers}, nil
}

// descriptor describes raw content of media type mt.
func descriptor(mt types.MediaType, raw []byte) (v1.Descriptor, error) {
	h, n, err := v1.SHA256(bytes.NewReader(raw))
	return v1.Descriptor{MediaType: mt, Size: n, Digest: h}, err
}

// MediaType implements v1.Image.
func (i *image) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// Size implements v1.Image: the manifest's.
func (i *image) Size() (int64, error) { return int64(len(i.manifest)), nil }

// Digest implements v1.Image: the manifest's.
func (i *image) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(i.manifest))
	return h, err
}

// RawManifest implements v1.Image.
func (i *image) RawManifest() ([]byte, error) { return i.manifest, nil }

// Manifest implements v1.Image.
func (i *image) Manifest() (*v1.Manifest, error) {
	return v1.ParseManifest(bytes.NewReader(i.manifest))
}

// RawConfigFile implements v1.Image.
func (i *image) RawConfigFile() ([]byte, error) { return i.config, nil }

// ConfigFile implements v1.Image.
func (i *image) ConfigFile() (*v1.ConfigFile, error) { return partial.ConfigFile(i) }

// ConfigName implements v1.Image: the config's digest.
func (i *image) ConfigName() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(i.config))
	return h, err
}

// Layers implements v1.Image.
func (i *image) Layers() ([]v1.Layer, error) {
	out := make([]v1.Layer, len(i.layers))
	for j, l := range i.layers {
		out[j] = l
	}
	return out, nil
}

// LayerByDigest implements v1.Image; the config is one of its blobs.
func (i *image) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	for _, l := range i.layers {
		if l.digest == h {
			return l, nil
		}
	}
	if c, err := i.ConfigName(); err == nil && c == h {
		return static.NewLayer(i.config, types.OCIConfigJSON), nil
	}
	return nil, fmt.Errorf("the image has no blob %s", h)
}

// LayerByDiffID implements v1.Image: the layers are uncompressed, their
// diff IDs are their digests.
func (i *image) LayerByDiffID(h v1.Hash) (v1.Layer, error) { return i.LayerByDigest(h) }

// index is the image index over one image per platform.
type index struct {
	manifest []byte
	images   map[v1.Hash]*image
}

var _ v1.ImageIndex = (*index)(nil)

// newIndex makes the index of images, one per platform, in that order.
func newIndex(platforms []v1.Platform, images []*image, annotations map[string]string) (*index, error) {
	m := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Annotations: annotations}
	idx := &index{images: map[v1.Hash]*image{}}
	for j, img := range images {
		d, err := descriptor(types.OCIManifestSchema1, img.manifest)
		if err != nil {
			return nil, err
		}
		p := platforms[j]
		d.Platform = &p
		m.Manifests = append(m.Manifests, d)
		idx.images[d.Digest] = img
	}
	var err error
	idx.manifest, err = json.Marshal(m)
	return idx, err
}

// MediaType implements v1.ImageIndex.
func (x *index) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }

// Digest implements v1.ImageIndex.
func (x *index) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(x.manifest))
	return h, err
}

// Size implements v1.ImageIndex.
func (x *index) Size() (int64, error) { return int64(len(x.manifest)), nil }

// IndexManifest implements v1.ImageIndex.
func (x *index) IndexManifest() (*v1.IndexManifest, error) {
	return v1.ParseIndexManifest(bytes.NewReader(x.manifest))
}

// RawManifest implements v1.ImageIndex.
func (x *index) RawManifest() ([]byte, error) { return x.manifest, nil }

// Image implements v1.ImageIndex.
func (x *index) Image(h v1.Hash) (v1.Image, error) {
	if img, ok := x.images[h]; ok {
		return img, nil
	}
	return nil, fmt.Errorf("the index has no image %s", h)
}

// ImageIndex implements v1.ImageIndex: the index holds no index.
func (x *index) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return nil, fmt.Errorf("the index has no index %s", h)
}
