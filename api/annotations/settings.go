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
