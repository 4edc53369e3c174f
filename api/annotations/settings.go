package annotations

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Settings is the typed form of an object's modelgate annotations: what the
// mutators read instead of raw strings. It grows with each injection
// capability; its canonical JSON is hashed into the Injected record, so two
// objects with equal Settings get equal records.
type Settings struct {
	// Choice is the object's explicit injection choice, merged across the
	// object and its templates.
	Choice Choice `json:"-"`
	// Model is nil when the object names no model.
	Model *ModelSettings `json:"model,omitempty"`
	// GPU is zero when the object asks for no GPUs.
	GPU GPUSettings `json:"gpu,omitzero"`
	// Serving.Engine is empty when the object names no engine.
	Serving ServingSettings `json:"serving,omitzero"`
	// Container is the serving container's name, empty when not given.
	Container string `json:"container,omitempty"`
	// Profile is the Configuration profile the settings were based on.
	Profile string `json:"profile,omitempty"`
	// Origins says where each setting that applies came from, keyed by
	// annotation (Model, GPU, ...): the object's own annotation, or the
	// profile's default. Mutators read it to let a value the workload
	// declares itself win over a profile's default, and to name the
	// annotation the user wrote in errors. It is not part of Hash.
	Origins map[string]Origin `json:"-"`
}

// Origin is where a setting's value came from.
type Origin struct {
	// Path is the annotation's field path, or for a profile's value the path
	// of the Profile annotation that chose the profile.
	Path *field.Path
	// Profile names the profile the value came from, empty for the object's
	// own annotation.
	Profile string
}

// Explicit reports whether the object sets the key itself (not through a
// profile).
func (s Settings) Explicit(key string) bool {
	o, ok := s.Origins[key]
	return ok && o.Profile == ""
}

// Set reports whether the key applies, from the object or its profile.
func (s Settings) Set(key string) bool {
	_, ok := s.Origins[key]
	return ok
}

// Origin returns where the key's value came from; its Path is
// metadata.annotations[key] when the key is not set.
func (s Settings) Origin(key string) Origin {
	if o, ok := s.Origins[key]; ok {
		return o
	}
	return Origin{Path: field.NewPath("metadata", "annotations").Key(key)}
}

// Source is one annotation map of an object, with the field path it lives
// at (for example spec.template.metadata.annotations).
type Source struct {
	Path        *field.Path
	Annotations map[string]string
}

// Hash returns a short, stable digest of the settings, used in the Injected
// record to tell whether an object was injected with the same settings.
func (s Settings) Hash() string {
	// Settings holds only plain data, so marshalling cannot fail.
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
