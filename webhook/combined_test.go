package webhook

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
)

// TestCombinedQueriesAgree judges every golden object, as written and as
// injected, as a CREATE and as an UPDATE, under the library's sample
// policies evaluated in one query and one query each: the answers are the
// same, and the combined query was the one used: a review whose set of
// policies has no query yet is evaluated one query each while it is
// prepared in the background, and again once it is ready.
func TestCombinedQueriesAgree(t *testing.T) {
	lib := samplePolicies(t)
	one := engineWith(t, policies.Options{}, lib)
	separate := engineWith(t, policies.Options{SeparateQueries: true}, lib)
	namespaces := fakeNamespaces{}
	for _, nss := range []fakeNamespaces{goldenNamespaces, testNamespaces} {
		maps.Copy(namespaces, nss)
	}
	handler := func(e *policies.Engine) *Validating {
		return NewValidating(config.New(), e, namespaces, NewPolicyMetrics(nil))
	}
	oneH, separateH := handler(one), handler(separate)
	ctx := context.Background()
	judge := func(r admission.Request) admission.Response {
		for range 500 {
			before := one.CombinedReviews()
			resp := oneH.Handle(ctx, r)
			if one.CombinedReviews() > before {
				return resp
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s %s: not evaluated in one query within 5s", r.Kind.Kind, r.Name)
		return admission.Response{}
	}
	requests := map[string]admission.Request{"injected-bench-deployment": injectedReview(t)}
	for name, in := range goldenInputs(t) {
		obj := readGoldenInput(t, in)
		out := readGoldenOutput(t, name)
		requests[name+" as written"] = obj.request(admissionv1.Create, obj.raw, nil)
		requests[name+" injected"] = obj.request(admissionv1.Create, out, nil)
		requests[name+" update"] = obj.request(admissionv1.Update, out, obj.raw)
	}
	denied, warned := 0, 0
	for name, r := range requests {
		want, got := separateH.Handle(ctx, r), judge(r)
		if diff := cmp.Diff(want.AdmissionResponse, got.AdmissionResponse); diff != "" {
			t.Errorf("%s: one query answers differently (-separate +one):\n%s", name, diff)
		}
		if !want.Allowed {
			denied++
		}
		if len(want.Warnings) > 0 {
			warned++
		}
	}
	reviews := len(requests)
	if denied == 0 || denied == reviews || warned == 0 {
		t.Errorf("%d reviews, %d denied, %d warned: want some of each kind", reviews, denied, warned)
	}
	if got := separate.CombinedReviews(); got != 0 {
		t.Errorf("SeparateQueries: %d reviews were evaluated in one query", got)
	}
	t.Logf("%d reviews, %d denied, %d warned", reviews, denied, warned)
}
