package annotations

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// FuzzParse feeds arbitrary annotation keys and values, and an arbitrary
// modelgate.io/inject value, through Parse.
func FuzzParse(f *testing.F) {
	f.Add("app", "server", true, "true")
	f.Add(Inject, "false", false, "")
	f.Add(Injected, `{"mutators":["owner-metadata"],"settings":"44136fa355b3"}`, true, "maybe")
	f.Add(OwnerLabel, "alice", true, "TRUE")
	f.Add("", "", true, "")
	f.Add("example.com/x", "\xff\xfe", true, "tru\x00e")
	f.Fuzz(func(t *testing.T, key, value string, hasInject bool, inject string) {
		m := map[string]string{key: value}
		if hasInject {
			m[Inject] = inject
		}
		p := field.NewPath("spec", "template", "metadata", "annotations")
		s, errs := Parse(Source{Path: field.NewPath("metadata", "annotations")}, Source{Path: p, Annotations: m})

		v, present := m[Inject]
		valid := !present || v == "true" || v == "false"
		if valid && len(errs) > 0 {
			t.Fatalf("Parse(%q) errors on a valid value: %v", m, errs)
		}
		if !valid && len(errs) != 1 {
			t.Fatalf("Parse(%q) = %d errors, want 1", m, len(errs))
		}
		if len(errs) > 0 {
			return
		}
		want := map[string]Choice{"": Unset, "true": OptIn, "false": OptOut}[v]
		if s.Choice != want {
			t.Fatalf("Parse(%q) choice = %v, want %v", m, s.Choice, want)
		}
	})
}
