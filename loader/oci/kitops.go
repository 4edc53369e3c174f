package oci

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/opencontainers/go-digest"

	"github.com/modelgate/modelgate/loader"
)

// kitConfig is the part of a ModelKit's config (its Kitfile as JSON) that
// says where layers go. Its lists are in the order of the manifest's
// layers of each kind.
type kitConfig struct {
	Model    *kitEntry  `json:"model,omitempty"`
	Code     []kitEntry `json:"code,omitempty"`
	DataSets []kitEntry `json:"datasets,omitempty"`
	Docs     []kitEntry `json:"docs,omitempty"`
}

// kitEntry is one model, part, dataset, code or docs entry.
type kitEntry struct {
	Path string `json:"path,omitempty"`
	// Digest is the layer's, in ModelKits packed since KitOps added it;
	// their tar entries are named from the model root.
	Digest string     `json:"digest,omitempty"`
	Parts  []kitEntry `json:"parts,omitempty"`
}

// kitCursor walks a ModelKit's config along the manifest's layers, as
// `kit unpack` does. A nil cursor (no ModelKit config) extracts every
// layer at the root.
type kitCursor struct {
	cfg  kitConfig
	seen map[string]int
}

// parseKitConfig reads a ModelKit config.
func parseKitConfig(b []byte) (*kitCursor, error) {
	k := &kitCursor{seen: map[string]int{}}
	if err := json.Unmarshal(b, &k.cfg); err != nil {
		return nil, fmt.Errorf("modelkit config is not JSON: %w: %w", err, loader.ErrInvalid)
	}
	return k, nil
}

// dir is the directory the next layer of kind extracts into: the root for
// a current ModelKit, the Kitfile path's directory for an older one whose
// tar entries are named from there.
func (k *kitCursor) dir(kind string, d digest.Digest) (string, error) {
	if k == nil {
		return "", nil
	}
	i := k.seen[kind]
	k.seen[kind]++
	var list []kitEntry
	switch kind {
	case "model":
		if k.cfg.Model != nil {
			list = []kitEntry{*k.cfg.Model}
		}
	case "modelpart":
		if k.cfg.Model != nil {
			list = k.cfg.Model.Parts
		}
	case "code":
		list = k.cfg.Code
	case "dataset":
		list = k.cfg.DataSets
	case "docs":
		list = k.cfg.Docs
	}
	if i >= len(list) {
		return "", fmt.Errorf("modelkit config lists %d %s entries, the manifest has more %s layers: %w", len(list), kind, kind, loader.ErrInvalid)
	}
	e := list[i]
	if e.Digest != "" {
		if e.Digest != d.String() {
			return "", fmt.Errorf("modelkit config gives %s entry %q digest %s, the manifest's layer differs: %w", kind, e.Path, e.Digest, loader.ErrInvalid)
		}
		return "", nil
	}
	if dir := path.Dir(e.Path); dir != "." {
		return dir, nil
	}
	return "", nil
}
