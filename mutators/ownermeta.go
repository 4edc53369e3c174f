package mutators

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/modelgate/modelgate/api/annotations"
)

// OwnerMetadataName is the OwnerMetadata mutator's stable name.
const OwnerMetadataName = "owner-metadata"

// OwnerMetadata stamps who owns a workload: the label modelgate.io/owner
// (the requester, as a label value), the annotation modelgate.io/owner-full
// (the full user name, when the label had to shorten or clean it) and the
// label modelgate.io/team (the namespace's modelgate.io/team label), on the
// object and on every template it carries, so objects created from the
// templates inherit them.
//
// The owner is whoever acted first: an UPDATE keeps the previous object's
// owner whoever sends it, and a trusted controller creating an object from a
// template keeps the owner the template carries when modelgate sealed it
// (see SealMetadata). Anyone else's hand-set owner or team is replaced.
type OwnerMetadata struct{}

var _ Mutator = OwnerMetadata{}

// Name implements Mutator.
func (OwnerMetadata) Name() string { return OwnerMetadataName }

// Mutate implements Mutator.
func (OwnerMetadata) Mutate(t *Target, in *Input) (bool, error) {
	owner, full := resolveOwner(t, in)
	team := in.NamespaceLabels[annotations.NamespaceTeam]
	if len(validation.IsValidLabelValue(team)) > 0 {
		team = ""
	}
	changed := false
	for _, m := range t.Metas() {
		changed = setLabel(m, annotations.OwnerLabel, owner) || changed
		changed = setAnnotation(m, annotations.OwnerFull, full) || changed
		changed = setLabel(m, annotations.TeamLabel, team) || changed
	}
	return changed, nil
}

// resolveOwner decides the owner label value and full name.
func resolveOwner(t *Target, in *Input) (owner, full string) {
	if in.Old != nil {
		if o := in.Old.Labels[annotations.OwnerLabel]; o != "" {
			return o, in.Old.Annotations[annotations.OwnerFull]
		}
	}
	if in.Requester.Trusted {
		// A controller stamping out a template: keep what the template
		// carried, from the object itself or its innermost template, when
		// modelgate sealed it. An unsealed owner was made up by whoever
		// wrote the template (a ReplicaSet modelgate never admitted, say):
		// such an object has no owner.
		for _, m := range []*metav1.ObjectMeta{t.Object, t.PodMeta()} {
			if o := m.Labels[annotations.OwnerLabel]; o != "" && in.sealed(m) {
				return o, m.Annotations[annotations.OwnerFull]
			}
		}
		return "", ""
	}
	return OwnerLabelValue(in.Requester.Username)
}
