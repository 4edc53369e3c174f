package oci

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/modelgate/modelgate/loader"
)

// List resolves the reference to a manifest digest (the Revision) and
// lists the image manifest's layers as files.
func (s *Source) List(ctx context.Context) (*loader.Listing, error) {
	rev, m, err := s.resolve(ctx)
	if err != nil {
		return nil, err
	}
	var kit *kitCursor
	if m.Config.MediaType == mediaTypeKitConfig && slices.ContainsFunc(m.Layers, isKitLayer) {
		if kit, err = s.kitConfig(ctx, m.Config.Digest); err != nil {
			return nil, err
		}
	}
	files, err := layerFiles(m.Layers, kit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	if err := s.markSequential(ctx, files); err != nil {
		return nil, err
	}
	return &loader.Listing{Revision: rev.String(), Files: files}, nil
}

func isKitLayer(l ocispec.Descriptor) bool { return strings.HasPrefix(l.MediaType, kitOpsPrefix) }

// kitConfig fetches and parses a ModelKit's config blob.
func (s *Source) kitConfig(ctx context.Context, d digest.Digest) (*kitCursor, error) {
	what := fmt.Sprintf("%s: modelkit config %s", s, d)
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, err, loader.ErrInvalid)
	}
	resp, err := s.get(ctx, s.blobURL(d.String()), nil, what) //nolint:bodyclose // readVerified closes it
	if err != nil {
		return nil, err
	}
	b, _, err := readVerified(resp, d, what)
	if err != nil {
		return nil, err
	}
	k, err := parseKitConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return k, nil
}

// markSequential asks for the first byte of the largest blob: a registry
// (or the blob store it redirects to) that answers with the whole blob
// does not serve ranges, so every file is read in one request.
func (s *Source) markSequential(ctx context.Context, files []loader.File) error {
	i := -1
	for j, f := range files {
		if f.Size > 0 && (i < 0 || f.Size > files[i].Size) {
			i = j
		}
	}
	if i < 0 {
		return nil
	}
	what := fmt.Sprintf("%s: layer %s", s, files[i].Key)
	resp, err := s.get(ctx, s.blobURL(files[i].Key), http.Header{"Range": {"bytes=0-0"}}, what)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusPartialContent {
		return nil
	}
	for j := range files {
		files[j].Sequential = true
	}
	return nil
}

// Open reads bytes [off, off+n) of a layer's blob; a read of the whole
// blob asks for no range.
func (s *Source) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	d, err := digest.Parse(f.Key)
	if err != nil {
		return nil, fmt.Errorf("%s: file %q has key %q, not a blob digest: %w", s, f.Path, f.Key, loader.ErrInvalid)
	}
	if off < 0 || n <= 0 || off+n > f.Size {
		return nil, fmt.Errorf("%s: range %d+%d outside layer %s of %d bytes: %w", s, off, n, d, f.Size, loader.ErrInvalid)
	}
	what := fmt.Sprintf("%s: layer %s", s, d)
	if f.Path != "" {
		what += fmt.Sprintf(" (%s)", f.Path)
	}
	h := http.Header{}
	if off != 0 || n != f.Size {
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	resp, err := s.get(ctx, s.blobURL(d.String()), h, what) //nolint:bodyclose // RangeBody closes it on failure; otherwise the returned reader owns it
	if err != nil {
		return nil, err
	}
	rc, err := loader.RangeBody(resp, off, n, f.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rc, nil
}

func (s *Source) blobURL(d string) string { return s.baseURL() + "/blobs/" + d }
