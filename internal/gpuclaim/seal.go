package gpuclaim

import (
	"encoding/json"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/modelgate/modelgate/internal/seal"
)

// SealAnnotation is the annotation holding modelgate's seal of a template
// (seal.Key.SignObject): of its namespace, name and spec, under the key only
// modelgate's replicas hold. It is the proof that modelgate made the
// template, which the controller asks for before it deletes one:
// ManagedByLabel alone is not, since anyone who can write a template can
// write the label.
const SealAnnotation = "resource.modelgate.io/seal"

// sealKind is the kind a template's seal is made for.
const sealKind = "ResourceClaimTemplate"

// Seal writes k's seal of t into t's SealAnnotation; a nil k writes none.
func Seal(k *seal.Key, t *resourcev1.ResourceClaimTemplate) {
	s := k.SignObject(sealKind, t.Namespace, t.Name, sealed(t))
	if s == "" {
		return
	}
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[SealAnnotation] = s
}

// Sealed reports whether t carries k's seal of its namespace, name and
// spec: whether modelgate made it as it is. False for a nil k, a template
// without the annotation (one a user made, or one an older modelgate made
// before templates were sealed), or one whose spec the API server reads
// back otherwise than modelgate wrote it.
func Sealed(k *seal.Key, t *resourcev1.ResourceClaimTemplate) bool {
	s := t.Annotations[SealAnnotation]
	return s != "" && k.VerifyObject(s, sealKind, t.Namespace, t.Name, sealed(t))
}

// sealed is what a template's seal covers besides its namespace and name:
// its spec, as JSON.
func sealed(t *resourcev1.ResourceClaimTemplate) []byte {
	// The spec holds plain data: marshalling cannot fail.
	b, _ := json.Marshal(&t.Spec)
	return b
}
