package oci

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/modelgate/modelgate/loader"
)

// Layer annotations that name where a layer's content goes.
const (
	// annotationFilepath is ModelPack's path of a layer's file.
	annotationFilepath = "org.cncf.model.filepath"
	// annotationFilepathLegacy is the same before the CNCF rename.
	annotationFilepathLegacy = "org.cnai.model.filepath"
	// annotationOrasUnpack marks a directory `oras push` packed as
	// tar+gzip, entries prefixed with the directory's name (the title).
	annotationOrasUnpack = "io.deis.oras.content.unpack"
)

// Media type prefixes of model layers.
const (
	modelPackPrefix       = "application/vnd.cncf.model."
	modelPackLegacyPrefix = "application/vnd.cnai.model."
	kitOpsPrefix          = "application/vnd.kitops.modelkit."
	// mediaTypeKitConfig is a ModelKit's config: its Kitfile as JSON.
	mediaTypeKitConfig = "application/vnd.kitops.modelkit.config.v1+json"
)

// modelPackKinds are what a ModelPack layer holds.
var modelPackKinds = []string{"weight", "weight.config", "doc", "code", "dataset"}

// kitOpsKinds are what a ModelKit layer holds.
var kitOpsKinds = []string{"model", "modelpart", "dataset", "code", "docs"}

// imageLayers are container image layers, extracted in order at the root.
var imageLayers = map[string]loader.Archive{
	ocispec.MediaTypeImageLayer:                         loader.ArchiveTar,
	ocispec.MediaTypeImageLayerGzip:                     loader.ArchiveTarGzip,
	ocispec.MediaTypeImageLayerZstd:                     loader.ArchiveTarZstd,
	"application/vnd.docker.image.rootfs.diff.tar.gzip": loader.ArchiveTarGzip,
	"application/vnd.docker.image.rootfs.diff.tar":      loader.ArchiveTar,
}

// archiveFormats are the ".v1.<format>" endings of model layer types.
var archiveFormats = map[string]loader.Archive{
	"raw":      loader.ArchiveNone,
	"tar":      loader.ArchiveTar,
	"tar+gzip": loader.ArchiveTarGzip,
	"tar+zstd": loader.ArchiveTarZstd,
}

// modelLayerType splits "<prefix><kind>.v1.<format>" for the given kinds.
func modelLayerType(mediaType, prefix string, kinds []string) (kind string, a loader.Archive, ok bool) {
	rest, ok := strings.CutPrefix(mediaType, prefix)
	if !ok {
		return "", "", false
	}
	kind, format, ok := strings.Cut(rest, ".v1.")
	if !ok || !slices.Contains(kinds, kind) {
		return "", "", false
	}
	a, ok = archiveFormats[format]
	return kind, a, ok
}

// placement is where one layer goes.
type placement struct {
	path   string         // the file, or the directory to extract into
	unpack loader.Archive // ArchiveNone for a file
	claim  string         // a file path the layer is known to write, for duplicate checks
}

// place decides where layer goes from its media type and annotations; kit
// is the ModelKit's config when the manifest is one.
func place(layer ocispec.Descriptor, kit *kitCursor) (placement, error) {
	mt, ann := layer.MediaType, layer.Annotations
	title := ann[ocispec.AnnotationTitle]
	for _, prefix := range []string{modelPackPrefix, modelPackLegacyPrefix} {
		if _, a, ok := modelLayerType(mt, prefix, modelPackKinds); ok {
			fp := ann[annotationFilepath]
			if fp == "" {
				fp = ann[annotationFilepathLegacy]
			}
			if a != loader.ArchiveNone {
				// modctl names the entries by their path from the model
				// root and extracts there; the annotation is that path.
				return placement{unpack: a, claim: fp}, nil
			}
			if fp == "" {
				fp = title
			}
			if fp == "" {
				return placement{}, fmt.Errorf("layer of media type %s has no %s annotation: %w", mt, annotationFilepath, loader.ErrInvalid)
			}
			return placement{path: fp, claim: fp}, nil
		}
	}
	if kind, a, ok := modelLayerType(mt, kitOpsPrefix, kitOpsKinds); ok && a != loader.ArchiveNone {
		dir, err := kit.dir(kind, layer.Digest)
		return placement{path: dir, unpack: a}, err
	}
	if title != "" {
		if ann[annotationOrasUnpack] == "true" {
			// oras always packs directories as tar+gzip, whatever the
			// media type says.
			return placement{unpack: loader.ArchiveTarGzip, claim: title}, nil
		}
		// oras push gives files the media type of an image layer (tar)
		// unless told otherwise: the title, not the type, says "file".
		return placement{path: title, claim: title}, nil
	}
	if a, ok := imageLayers[mt]; ok {
		return placement{unpack: a}, nil
	}
	return placement{}, fmt.Errorf("layer of media type %q is neither a model layer (ModelPack, KitOps), a titled file nor an image layer: %w", mt, loader.ErrInvalid)
}

// layerFiles turns a manifest's layers into the files to load.
func layerFiles(layers []ocispec.Descriptor, kit *kitCursor) ([]loader.File, error) {
	files := make([]loader.File, 0, len(layers))
	claimed := map[string]digest.Digest{}
	type extraction struct {
		dir    string
		unpack loader.Archive
		layer  digest.Digest
	}
	extracted := map[extraction]bool{}
	for i, l := range layers {
		what := fmt.Sprintf("layer %d (%s)", i+1, l.Digest)
		if err := l.Digest.Validate(); err != nil || l.Digest.Algorithm() != digest.SHA256 {
			return nil, fmt.Errorf("layer %d: digest %q is not sha256:<64 hex>: %w", i+1, l.Digest, loader.ErrInvalid)
		}
		if l.Size < 0 {
			return nil, fmt.Errorf("%s: size %d is negative: %w", what, l.Size, loader.ErrInvalid)
		}
		p, err := place(l, kit)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if p.path != "" {
			if p.path, err = loader.CleanPath(p.path); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		if p.claim != "" {
			c, err := loader.CleanPath(p.claim)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			if prev, ok := claimed[c]; ok {
				return nil, fmt.Errorf("%s and layer %s both hold %q: %w", what, prev, c, loader.ErrInvalid)
			}
			claimed[c] = l.Digest
		}
		if p.unpack != loader.ArchiveNone {
			// An image may repeat a layer; extracting it again adds
			// nothing, and the loader keys files by path and digest.
			x := extraction{p.path, p.unpack, l.Digest}
			if extracted[x] {
				continue
			}
			extracted[x] = true
		}
		files = append(files, loader.File{
			Path:    p.path,
			Size:    l.Size,
			Digests: []loader.Digest{{Algorithm: loader.SHA256, Hex: l.Digest.Encoded()}},
			Version: l.Digest.String(),
			Key:     l.Digest.String(),
			Unpack:  p.unpack,
		})
	}
	return files, nil
}
