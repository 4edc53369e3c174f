package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"runtime"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/modelgate/modelgate/loader"
)

// Docker's manifest media types, which registries still serve for images.
const (
	mediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// manifestAccept lists the manifests List reads.
var manifestAccept = strings.Join([]string{
	ocispec.MediaTypeImageManifest, ocispec.MediaTypeImageIndex,
	mediaTypeDockerManifest, mediaTypeDockerList,
}, ", ")

// maxIndexDepth bounds indexes nested in indexes.
const maxIndexDepth = 4

// manifest is an image manifest or an index, whichever the JSON holds.
type manifest struct {
	MediaType    string               `json:"mediaType"`
	ArtifactType string               `json:"artifactType,omitempty"`
	Config       ocispec.Descriptor   `json:"config"`
	Layers       []ocispec.Descriptor `json:"layers"`
	Manifests    []ocispec.Descriptor `json:"manifests"`
}

func (m *manifest) isIndex() bool {
	return m.MediaType == ocispec.MediaTypeImageIndex || m.MediaType == mediaTypeDockerList
}

func (m *manifest) isImage() bool {
	return m.MediaType == ocispec.MediaTypeImageManifest || m.MediaType == mediaTypeDockerManifest
}

// resolve fetches the manifest the reference names and, through indexes,
// the image manifest for this platform. The revision is the digest of the
// first: what the reference resolved to.
func (s *Source) resolve(ctx context.Context) (digest.Digest, *manifest, error) {
	var want digest.Digest // "" for a tag
	if d, err := digest.Parse(s.ref.Reference); err == nil {
		want = d
	}
	rev, m, err := s.fetchManifest(ctx, s.ref.Reference, want, s.String())
	if err != nil {
		return "", nil, err
	}
	what := s.String()
	for depth := 0; m.isIndex(); depth++ {
		if depth == maxIndexDepth {
			return "", nil, fmt.Errorf("%s: indexes nested more than %d deep: %w", s, maxIndexDepth, loader.ErrInvalid)
		}
		d, err := pickManifest(m.Manifests, "linux", runtime.GOARCH)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", what, err)
		}
		what = fmt.Sprintf("%s (manifest %s of index %s)", s, d.Digest, rev)
		if _, m, err = s.fetchManifest(ctx, d.Digest.String(), d.Digest, what); err != nil {
			return "", nil, err
		}
	}
	if !m.isImage() {
		return "", nil, fmt.Errorf("%s: manifest of media type %q is neither an image manifest nor an index: %w", what, m.MediaType, loader.ErrInvalid)
	}
	if len(m.Layers) == 0 {
		return "", nil, fmt.Errorf("%s: manifest has no layers: %w", what, loader.ErrNotFound)
	}
	return rev, m, nil
}

// fetchManifest GETs the manifest reference (a tag or digest) and checks
// it against want when set.
func (s *Source) fetchManifest(ctx context.Context, reference string, want digest.Digest, what string) (digest.Digest, *manifest, error) {
	h := http.Header{"Accept": {manifestAccept}}
	resp, err := s.get(ctx, s.baseURL()+"/manifests/"+reference, h, what) //nolint:bodyclose // readVerified closes it
	if err != nil {
		return "", nil, err
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	body, got, err := readVerified(resp, want, what)
	if err != nil {
		return "", nil, err
	}
	var m manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return "", nil, fmt.Errorf("%s: manifest is not JSON: %w: %w", what, err, loader.ErrInvalid)
	}
	if m.MediaType == "" {
		m.MediaType = ctype
	}
	if !m.isIndex() && !m.isImage() && (m.MediaType == "" || m.MediaType == "application/json") {
		// An old OCI manifest without mediaType, served as JSON.
		switch {
		case m.Manifests != nil:
			m.MediaType = ocispec.MediaTypeImageIndex
		case m.Layers != nil:
			m.MediaType = ocispec.MediaTypeImageManifest
		}
	}
	return got, &m, nil
}

// pickManifest chooses from an index's entries the only one, attestations
// aside, or else the one for os/arch.
func pickManifest(list []ocispec.Descriptor, os, arch string) (ocispec.Descriptor, error) {
	var cands []ocispec.Descriptor
	for _, d := range list {
		if d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" {
			continue
		}
		cands = append(cands, d)
	}
	switch len(cands) {
	case 0:
		return ocispec.Descriptor{}, fmt.Errorf("index lists no manifests: %w", loader.ErrNotFound)
	case 1:
		return cands[0], nil
	}
	for _, d := range cands {
		if d.Platform != nil && d.Platform.OS == os && d.Platform.Architecture == arch {
			return d, nil
		}
	}
	var have []string
	for _, d := range cands {
		have = append(have, platformString(d.Platform))
	}
	slices.Sort(have)
	return ocispec.Descriptor{}, fmt.Errorf("index has no manifest for %s/%s, only for %s: %w",
		os, arch, strings.Join(slices.Compact(have), ", "), loader.ErrNotFound)
}

func platformString(p *ocispec.Platform) string {
	if p == nil {
		return "(no platform)"
	}
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}
