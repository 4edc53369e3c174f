package seal

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An object's seal verifies for that kind, namespace, name and content
// under that key only.
func TestVerifyObject(t *testing.T) {
	k, _ := New([]byte("0123456789abcdef0123456789abcdef"))
	other, _ := New([]byte("fedcba9876543210fedcba9876543210"))
	content := []byte(`{"spec":{"devices":{}}}`)
	s := k.SignObject("ResourceClaimTemplate", "team-a", "modelgate-gpu-1-abc", content)
	if !k.VerifyObject(s, "ResourceClaimTemplate", "team-a", "modelgate-gpu-1-abc", content) {
		t.Fatal("a fresh object seal does not verify")
	}
	for name, tc := range map[string]struct {
		key              *Key
		s, kind, ns, obj string
		content          []byte
	}{
		"other kind":      {key: k, s: s, kind: "ResourceClaim", ns: "team-a", obj: "modelgate-gpu-1-abc", content: content},
		"other namespace": {key: k, s: s, kind: "ResourceClaimTemplate", ns: "team-b", obj: "modelgate-gpu-1-abc", content: content},
		"other name":      {key: k, s: s, kind: "ResourceClaimTemplate", ns: "team-a", obj: "modelgate-gpu-1-abd", content: content},
		"other content":   {key: k, s: s, kind: "ResourceClaimTemplate", ns: "team-a", obj: "modelgate-gpu-1-abc", content: []byte(`{"spec":{}}`)},
		"parts shifted":   {key: k, s: s, kind: "ResourceClaimTemplate", ns: "team-amodelgate-gpu-1-abc", content: content},
		"other key":       {key: other, s: s, kind: "ResourceClaimTemplate", ns: "team-a", obj: "modelgate-gpu-1-abc", content: content},
		"nil key":         {s: s, kind: "ResourceClaimTemplate", ns: "team-a", obj: "modelgate-gpu-1-abc", content: content},
		"no seal":         {key: k, kind: "ResourceClaimTemplate", ns: "team-a", obj: "modelgate-gpu-1-abc", content: content},
		"a metadata seal": {key: k, s: k.Sign("team-a", &metav1.ObjectMeta{}), kind: "ResourceClaimTemplate", ns: "team-a", obj: "modelgate-gpu-1-abc", content: content},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.key.VerifyObject(tc.s, tc.kind, tc.ns, tc.obj, tc.content) {
				t.Error("VerifyObject = true, want false")
			}
		})
	}
	if got := (*Key)(nil).SignObject("ResourceClaimTemplate", "team-a", "x", content); got != "" {
		t.Errorf("a nil key signed: %q", got)
	}
}
