package gpuclaim

import (
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/seal"
)

// A template modelgate sealed verifies; the managed-by label alone, a
// seal copied to another name or namespace, a changed spec or another key
// does not.
func TestSealed(t *testing.T) {
	k, _ := seal.New([]byte("0123456789abcdef0123456789abcdef"))
	other, _ := seal.New([]byte("fedcba9876543210fedcba9876543210"))
	g := annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-H100-80GB-HBM3"}}
	tmpl, err := Template("team-a", g, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if Sealed(k, tmpl) {
		t.Fatal("a template with the label only (as a user, or an older modelgate, writes it) is sealed")
	}
	Seal(k, tmpl)
	if !Sealed(k, tmpl) {
		t.Fatal("a template modelgate sealed does not verify")
	}
	for name, edit := range map[string]func(c *resourcev1.ResourceClaimTemplate){
		"other namespace": func(c *resourcev1.ResourceClaimTemplate) { c.Namespace = "team-b" },
		"other name":      func(c *resourcev1.ResourceClaimTemplate) { c.Name = TemplatePrefix + "2-0000000000" },
		"spec changed":    func(c *resourcev1.ResourceClaimTemplate) { c.Spec.Spec.Devices.Requests[0].Exactly.Count = 8 },
		"seal removed":    func(c *resourcev1.ResourceClaimTemplate) { delete(c.Annotations, SealAnnotation) },
	} {
		t.Run(name, func(t *testing.T) {
			c := tmpl.DeepCopy()
			edit(c)
			if Sealed(k, c) {
				t.Error("Sealed = true, want false")
			}
		})
	}
	if Sealed(other, tmpl) || Sealed(nil, tmpl) {
		t.Error("another key, or none, verified the seal")
	}
	unsealed, _ := Template("team-a", g, DefaultOptions())
	Seal(nil, unsealed)
	if _, ok := unsealed.Annotations[SealAnnotation]; ok {
		t.Error("a nil key wrote a seal")
	}
}
