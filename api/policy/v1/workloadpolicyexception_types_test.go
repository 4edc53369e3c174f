package v1

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The generated WorkloadPolicyException CRD: namespaced, wpolex, a status
// subresource, the columns kubectl shows, and the fields the API server
// requires before the webhook sees the object.
func TestExceptionCRD(t *testing.T) {
	crd := loadCRDFile(t, filepath.Join(filepath.Dir(crdPath), "policy.modelgate.io_workloadpolicyexceptions.yaml"))
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope = %q, want Namespaced", crd.Spec.Scope)
	}
	if diff := cmp.Diff([]string{"wpolex"}, crd.Spec.Names.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	v := v1Version(t, crd)
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource: modelgate writes status.state")
	}
	var cols []string
	for _, c := range v.AdditionalPrinterColumns {
		cols = append(cols, c.Name)
	}
	if diff := cmp.Diff([]string{"Policies", "Expires", "State", "Ticket", "Age"}, cols); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
	spec := property(t, v.Schema.OpenAPIV3Schema, "spec")
	for _, f := range []string{"policies", "expiresAt", "reason"} {
		if !slices.Contains(spec.Required, f) {
			t.Errorf("spec.required %v: want %s", spec.Required, f)
		}
	}
	if p := property(t, spec, "policies"); p.MinItems == nil || *p.MinItems != 1 {
		t.Errorf("spec.policies minItems %v, want 1", p.MinItems)
	}
	if r := property(t, spec, "reason"); r.MinLength == nil || *r.MinLength != 1 {
		t.Errorf("spec.reason minLength %v, want 1", r.MinLength)
	}
	// policySource is optional (a WorkloadPolicy when unset), one of the
	// two sources.
	src := property(t, spec, "policySource")
	var enum []string
	for _, e := range src.Enum {
		enum = append(enum, strings.Trim(string(e.Raw), `"`))
	}
	if diff := cmp.Diff([]string{string(PolicySourceWorkloadPolicy), string(PolicySourceDirectory)}, enum); diff != "" {
		t.Errorf("spec.policySource enum (-want +got):\n%s", diff)
	}
	if slices.Contains(spec.Required, "policySource") || src.Default != nil {
		t.Errorf("spec.policySource required or defaulted: an exception written before it existed means what it meant")
	}
}
