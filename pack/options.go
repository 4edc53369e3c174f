package pack

import (
	"fmt"
	"path"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultLayerThreshold is the size from which a file gets a layer of its
// own when Options.LayerThreshold is zero: 1 MiB.
const DefaultLayerThreshold = 1 << 20

// The annotations Build writes on the index and on each manifest.
const (
	// AnnotationSource is the OCI annotation naming where the content
	// comes from: the model URI, credentials redacted.
	AnnotationSource = "org.opencontainers.image.source"
	// AnnotationModelURI is the model URI, credentials redacted.
	AnnotationModelURI = "io.modelgate.model.uri"
	// AnnotationHFRepo is a Hugging Face model's repository (org/name).
	AnnotationHFRepo = "io.modelgate.hf.repo"
	// AnnotationHFCommit is the commit of a Hugging Face model the image
	// holds.
	AnnotationHFCommit = "io.modelgate.hf.commit"
)

// DefaultPlatforms are the platforms Build makes a manifest for when
// Options.Platforms is empty. A model has no architecture, but containerd
// picks a manifest by platform, so the index lists the nodes' usual ones.
var DefaultPlatforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// Model says what the image holds, for its annotations.
type Model struct {
	// URI is the model URI with its credentials already redacted: it is
	// written into the image as is.
	URI string
	// HFRepo and HFCommit are a Hugging Face model's repository (org/name)
	// and the commit loaded; empty for other models.
	HFRepo, HFCommit string
}

// annotations are the index's and each manifest's annotations; nil when
// the model says nothing.
func (m Model) annotations() map[string]string {
	a := map[string]string{}
	for k, v := range map[string]string{
		AnnotationSource: m.URI, AnnotationModelURI: m.URI,
		AnnotationHFRepo: m.HFRepo, AnnotationHFCommit: m.HFCommit,
	} {
		if v != "" {
			a[k] = v
		}
	}
	if len(a) == 0 {
		return nil
	}
	return a
}

// Options configure Build. The zero value takes the defaults.
type Options struct {
	// LayerThreshold is the size from which a regular file gets a layer of
	// its own (default DefaultLayerThreshold).
	LayerThreshold int64
	// Exclude are paths relative to the directory, with '/' separators,
	// left out of the image with everything under them (`modelgate pack`
	// leaves out the loader's state directory).
	Exclude []string
	// Platforms are the manifests' platforms (default DefaultPlatforms).
	Platforms []v1.Platform
	// Model is written into the annotations.
	Model Model
	// Jobs is how many layers are hashed at once (default GOMAXPROCS).
	Jobs int
}

func (o *Options) validate() error {
	if o.LayerThreshold < 0 {
		return fmt.Errorf("the layer threshold %d must not be negative", o.LayerThreshold)
	}
	if o.LayerThreshold == 0 {
		o.LayerThreshold = DefaultLayerThreshold
	}
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms
	}
	o.Exclude = slices.Clone(o.Exclude) // the caller's slice stays as it was
	for i, e := range o.Exclude {
		c := path.Clean(e)
		if c == "." || path.IsAbs(c) || c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("excluded path %q must be relative to the directory and inside it", e)
		}
		o.Exclude[i] = c
	}
	return nil
}

// excluded reports whether rel (slash separated, relative) is left out.
func (o *Options) excluded(rel string) bool {
	for _, e := range o.Exclude {
		if rel == e || strings.HasPrefix(rel, e+"/") {
			return true
		}
	}
	return false
}
