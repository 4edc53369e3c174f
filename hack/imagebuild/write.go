package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations of the index's entry in an OCI layout's index.json, which
// tools read to name the image: skopeo and podman the tag, containerd's
// `ctr import` the whole reference.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// WriteLayout writes idx as an OCI image layout directory at dir (oci-layout,
// index.json, blobs/sha256/...), replacing whatever was there. index.json
// has one entry, idx itself, named ref when ref is not empty. The directory
// is written beside dir (dir.tmp) and renamed, so a failed write leaves dir
// as it was.
func WriteLayout(dir string, idx v1.ImageIndex, ref string) error {
	var opts []layout.Option
	if ref != "" {
		r, err := name.ParseReference(ref)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", ref, err)
		}
		opts = append(opts, layout.WithAnnotations(map[string]string{
			annotationRefName:        r.Identifier(),
			annotationContainerdName: r.Name(),
		}))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return err
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o750); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// WriteTarball writes the image of idx for platform p as a `docker load`
// tarball (also read by podman load and kind load image-archive), tagged
// ref.
func WriteTarball(path string, idx v1.ImageIndex, p v1.Platform, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image tag %q: %w", ref, err)
	}
	img, err := ImageFor(idx, p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp) // best effort: the write's error is the one to report
		return fmt.Errorf("writing the image tarball: %w", err)
	}
	return os.Rename(tmp, path)
}

// ImageFor returns the image of idx for platform p.
func ImageFor(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Equals(p) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the index has no image for %s", platformString(p))
}

// Push pushes idx to ref with the credentials of the default keychain
// (docker's config.json, as `docker login` writes it) and returns the
// digest the registry stores it under.
func Push(ctx context.Context, idx v1.ImageIndex, ref string) (name.Digest, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if _, ok := r.(name.Digest); ok {
		return name.Digest{}, errors.New("cannot push to a digest reference: give a tag")
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return r.Context().Digest(d.String()), nil
}
