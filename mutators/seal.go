package mutators

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/seal"
)

// sealed reports whether m carries a valid seal of its reserved metadata in
// the input's namespace.
func (in *Input) sealed(m *metav1.ObjectMeta) bool {
	return in.Options != nil && in.Options.Seal.Verify(in.Namespace, m)
}

// Sealed reports whether m carries a valid seal of its reserved metadata in
// the input's namespace: whether modelgate wrote its owner, team and record.
func Sealed(m *metav1.ObjectMeta, in *Input) bool { return in.sealed(m) }

// SealMetadata signs the reserved metadata of the object and each template
// (seal.Key.Sign), or removes the seal from those that carry none. Callers
// run it last in a pass, once every reserved value is one modelgate chose.
// It reports whether anything changed.
func SealMetadata(t *Target, in *Input) bool {
	var key *seal.Key
	if in.Options != nil {
		key = in.Options.Seal
	}
	changed := false
	for _, m := range t.Metas() {
		value := ""
		if seal.Carries(m) {
			value = key.Sign(in.Namespace, m)
		}
		changed = setAnnotation(m, annotations.Seal, value) || changed
	}
	return changed
}

// Unsealed reports whether the object or a template carries reserved
// metadata without a valid seal.
func Unsealed(t *Target, in *Input) bool {
	for _, m := range t.Metas() {
		if seal.Carries(m) && !in.sealed(m) {
			return true
		}
	}
	return false
}

// ForgedMetadataName is the ForgedMetadata mutator's stable name.
const ForgedMetadataName = "forged-metadata"

// ForgedMetadata removes the reserved metadata (owner and team labels,
// owner-full, the Injected record and the seal) from the object and each
// template that carries it without a valid seal. It runs on objects that
// did not opt in which a trusted controller creates: a template modelgate
// never admitted (a ReplicaSet a user wrote, say) must not pass a made-up
// owner or record on through the controller.
type ForgedMetadata struct{}

var _ Mutator = ForgedMetadata{}

// Name implements Mutator.
func (ForgedMetadata) Name() string { return ForgedMetadataName }

// Mutate implements Mutator.
func (ForgedMetadata) Mutate(t *Target, in *Input) (bool, error) {
	changed := false
	for _, m := range t.Metas() {
		if !seal.Carries(m) || in.sealed(m) {
			continue
		}
		for _, k := range annotations.ReservedLabels {
			changed = setLabel(m, k, "") || changed
		}
		for _, k := range annotations.ReservedAnnotations {
			changed = setAnnotation(m, k, "") || changed
		}
	}
	return changed, nil
}
