package mutators

import (
	"encoding/json"
	"slices"

	"github.com/modelgate/modelgate/api/annotations"
)

// Record is the value of the modelgate.io/injected annotation: which
// mutators applied to the object and a hash of the settings they used.
type Record struct {
	Mutators []string `json:"mutators"`
	Settings string   `json:"settings"`
	// Owns lists the parts of the pod spec modelgate created (for example
	// "initContainer/model-loader"), so that a later pass replaces them
	// instead of stacking new ones, and never mistakes a part the user
	// wrote for its own.
	Owns []string `json:"owns,omitempty"`
	// GPUClaim is what the GPU claim modelgate added asks for (count,
	// products, memory), when the pod gets its GPUs through DRA: the
	// content of the ResourceClaimTemplate the claim names. The controller
	// creates that template from it, and the policies count its GPUs before
	// it exists; both believe it only under a valid seal.
	GPUClaim *annotations.GPUSettings `json:"gpuClaim,omitempty"`
}

// Owned reports whether the record says modelgate created the part.
func (r Record) Owned(part string) bool { return slices.Contains(r.Owns, part) }

// String is the record's canonical JSON form.
func (r Record) String() string {
	// A Record holds only plain data, so marshalling cannot fail.
	b, _ := json.Marshal(r)
	return string(b)
}

// ParseRecord reads a record written by String. ok is false when s is empty
// or not a record; such a value is simply replaced on the next pass.
func ParseRecord(s string) (r Record, ok bool) {
	if s == "" {
		return Record{}, false
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return Record{}, false
	}
	return r, true
}
