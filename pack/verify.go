package pack

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ErrMismatch says the registry does not hold what was pushed.
var ErrMismatch = errors.New("the registry does not hold the image pushed")

// Verify checks that tag names idx in the registry: the tag's digest is
// the index's, each manifest lists idx's layers, and the registry has
// every layer, of its size. It returns the reference by digest. A
// difference is an ErrMismatch naming the manifest or the layer (by the
// file it holds).
func Verify(ctx context.Context, idx v1.ImageIndex, tag name.Tag, o PushOptions) (name.Digest, error) {
	want, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	opts := o.remote(ctx)
	got, err := remote.Head(tag, opts...)
	if err != nil {
		return name.Digest{}, fmt.Errorf("reading %s back: %w", tag, err)
	}
	if got.Digest != want {
		return name.Digest{}, fmt.Errorf("%s names %s, not the index pushed, %s: %w", tag, got.Digest, want, ErrMismatch)
	}
	repo := tag.Context()
	im, err := idx.IndexManifest()
	if err != nil {
		return name.Digest{}, err
	}
	checked := map[v1.Hash]bool{}
	for _, d := range im.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return name.Digest{}, err
		}
		if err := verifyImage(repo, d, img, checked, opts); err != nil {
			return name.Digest{}, err
		}
	}
	return repo.Digest(want.String()), nil
}

// verifyImage checks one manifest of the index, and its layers not
// checked yet.
func verifyImage(repo name.Repository, d v1.Descriptor, img v1.Image, checked map[v1.Hash]bool, opts []remote.Option) error {
	what := d.Digest.String()
	if d.Platform != nil {
		what = d.Platform.String()
	}
	// By digest: remote checks the content against it.
	desc, err := remote.Get(repo.Digest(d.Digest.String()), opts...)
	if err != nil {
		return fmt.Errorf("reading the %s manifest back: %w", what, err)
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return fmt.Errorf("the %s manifest read back: %w", what, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(m.Layers) != len(layers) {
		return fmt.Errorf("the %s manifest lists %d layers, not %d: %w", what, len(m.Layers), len(layers), ErrMismatch)
	}
	for i, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		name := layerName(i, l, h)
		if m.Layers[i].Digest != h || m.Layers[i].Size != size {
			return fmt.Errorf("%s: the %s manifest lists %s of %d bytes, not %s of %d: %w",
				name, what, m.Layers[i].Digest, m.Layers[i].Size, h, size, ErrMismatch)
		}
		if checked[h] {
			continue
		}
		checked[h] = true
		if err := verifyBlob(repo, name, h, size, opts); err != nil {
			return err
		}
	}
	return nil
}

// verifyBlob checks with a HEAD request that the registry has blob h of
// size bytes.
func verifyBlob(repo name.Repository, what string, h v1.Hash, size int64, opts []remote.Option) error {
	rl, err := remote.Layer(repo.Digest(h.String()), opts...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	got, err := rl.Size() // a HEAD request
	if err != nil {
		return fmt.Errorf("%s: the registry has no blob %s (%w): %w", what, h, err, ErrMismatch)
	}
	if got != size {
		return fmt.Errorf("%s: the registry's blob %s has %d bytes, not %d: %w", what, h, got, size, ErrMismatch)
	}
	return nil
}

// layerName names layer i for messages: by what it holds when Build made
// it, else by its digest.
func layerName(i int, l v1.Layer, h v1.Hash) string {
	if s, ok := l.(fmt.Stringer); ok {
		return fmt.Sprintf("layer %d (%s)", i+1, s)
	}
	return fmt.Sprintf("layer %d (%s)", i+1, h)
}
