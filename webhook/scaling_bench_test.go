package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/validators"
)

// The scaling benchmarks of issue 17: what a validating review costs as the
// policies in force and the object grow, and what loading 100
// WorkloadPolicies costs a replica that starts.

// nPolicies is the library's sample WorkloadPolicies repeated to n, each
// under its own name.
func nPolicies(tb testing.TB, n int) []*policyv1.WorkloadPolicy {
	tb.Helper()
	return builders.ManyPolicies(samplePolicies(tb), n)
}

// engineOf compiles the policies into an engine, its policies prepared
// for evaluation in one query.
func engineOf(tb testing.TB, wps []*policyv1.WorkloadPolicy) *policies.Engine {
	return engineWith(tb, policies.Options{}, wps)
}

// engineWith compiles the policies into an engine with the options and
// prepares them.
func engineWith(tb testing.TB, o policies.Options, wps []*policyv1.WorkloadPolicy) *policies.Engine {
	tb.Helper()
	var cs []*policies.Compiled
	for _, wp := range wps {
		c, err := validators.CompileWorkloadPolicy(context.Background(), wp)
		if err != nil {
			tb.Fatalf("%s: %v", wp.Name, err)
		}
		cs = append(cs, c)
	}
	// Prepared before the swap, so that the preparation Swap starts in the
	// background finds it done instead of running into the benchmark.
	s := policies.NewSet(cs...)
	s.Prepare(context.Background())
	e := policies.NewEngine(o)
	e.Swap(s)
	return e
}

// BenchmarkValidatePolicies is the whole validating review of the typical
// injected Deployment with 1, 8 and 100 policies in force (the library,
// repeated), evaluated in one query and, the baseline, one query each.
func BenchmarkValidatePolicies(b *testing.B) {
	req := injectedReview(b)
	for _, n := range []int{1, 8, 100} {
		for _, separate := range []bool{false, true} {
			queries := map[bool]string{false: "one", true: "separate"}[separate]
			b.Run(fmt.Sprintf("policies=%d/queries=%s", n, queries), func(b *testing.B) {
				e := engineWith(b, policies.Options{SeparateQueries: separate}, nPolicies(b, n))
				benchValidate(b, NewValidating(config.New(), e, testNamespaces, NewPolicyMetrics(nil)), req)
			})
		}
	}
}

// benchValidate measures h's validating review of req, which it must
// allow, per object byte too.
func benchValidate(b *testing.B, h *Validating, req admission.Request) {
	b.Helper()
	ctx := benchContext()
	if resp := h.Handle(ctx, req); !resp.Allowed {
		b.Fatalf("denied: %s", resp.Result.Message)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(req.Object.Raw)))
	for b.Loop() {
		h.Handle(ctx, req)
	}
}

// BenchmarkValidateObjectSize is the same review under the library with
// the Deployment grown to about 4 KB (as injected), 100 KB and 1 MB by a
// kubectl.kubernetes.io/last-applied-configuration annotation, the field
// that makes real objects large: what no policy reads.
func BenchmarkValidateObjectSize(b *testing.B) {
	base := injectedReview(b)
	h := NewValidating(config.New(), libraryEngine(b), testNamespaces, NewPolicyMetrics(nil))
	for _, size := range []int{0, 100 << 10, 1 << 20} {
		req := grown(b, base, size)
		b.Run(fmt.Sprintf("object=%dKB", len(req.Object.Raw)>>10), func(b *testing.B) { benchValidate(b, h, req) })
	}
}

// grown is the review with the Deployment grown by about size bytes of
// last-applied configuration.
func grown(tb testing.TB, req admission.Request, size int) admission.Request {
	tb.Helper()
	if size == 0 {
		return req
	}
	return edited(tb, req, func(d *appsv1.Deployment) {
		lastApplied(d, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"note":"`+
			strings.Repeat("x", size)+`"}}}`)
	})
}

// edited is the review with its Deployment decoded, changed by edit and
// encoded again.
func edited(tb testing.TB, req admission.Request, edit func(*appsv1.Deployment)) admission.Request {
	tb.Helper()
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(req.Object.Raw, d); err != nil {
		tb.Fatal(err)
	}
	edit(d)
	out := req
	out.Object.Raw = toJSON(tb, d)
	return out
}

// lastApplied sets the kubectl.kubernetes.io/last-applied-configuration
// annotation.
func lastApplied(d *appsv1.Deployment, config string) {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = config
}

// BenchmarkMutateObjectSize is the mutating review of the opted-in vLLM
// Deployment as sent and grown to 100 KB and 1 MB by a last-applied
// configuration: what modelgate does not touch should cost it little.
func BenchmarkMutateObjectSize(b *testing.B) {
	a := map[string]string{
		"modelgate.io/inject": "true", "modelgate.io/model": "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
		"modelgate.io/gpu": "1", "modelgate.io/gpu-product": "NVIDIA-H100-80GB-HBM3", "modelgate.io/engine": "vllm",
	}
	base := create(b, object("Deployment", nsPlain, benchDeployment(builders.Options{TemplateAnnotations: a})), alice)
	h := newHandler()
	ctx := benchContext()
	for _, size := range []int{0, 100 << 10, 1 << 20} {
		req := grown(b, base, size)
		b.Run(fmt.Sprintf("object=%dKB", len(req.Object.Raw)>>10), func(b *testing.B) {
			resp := h.Handle(ctx, req)
			if !resp.Allowed || len(resp.Patch) == 0 {
				b.Fatalf("allowed=%v patch=%d bytes", resp.Allowed, len(resp.Patch))
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(req.Object.Raw)))
			for b.Loop() {
				h.Handle(ctx, req)
			}
			b.ReportMetric(float64(len(resp.Patch)), "patch-bytes")
		})
	}
}

// BenchmarkValidateAsSent is the injected Deployment under the library as
// the API server sends it after kubectl apply: with its
// last-applied-configuration (the object itself) and the managedFields of
// two managers, which make it about three times as large, beside the same
// object bare.
func BenchmarkValidateAsSent(b *testing.B) {
	bare := injectedReview(b)
	h := NewValidating(config.New(), libraryEngine(b), testNamespaces, NewPolicyMetrics(nil))
	for name, req := range map[string]admission.Request{"bare": bare, "as-sent": asSent(b, bare)} {
		b.Run(name, func(b *testing.B) { benchValidate(b, h, req) })
	}
}

// asSent is the review with the Deployment as the API server sends it
// after a kubectl apply: a last-applied-configuration of the object, and
// managedFields for kubectl's fields and the controller manager's status.
func asSent(tb testing.TB, req admission.Request) admission.Request {
	tb.Helper()
	var doc map[string]any
	if err := json.Unmarshal(req.Object.Raw, &doc); err != nil {
		tb.Fatal(err)
	}
	fields := func(v any) *metav1.FieldsV1 {
		raw, err := json.Marshal(fieldSet(v))
		if err != nil {
			tb.Fatal(err)
		}
		return metav1.NewFieldsV1(string(raw))
	}
	now := metav1.Now()
	return edited(tb, req, func(d *appsv1.Deployment) {
		d.ManagedFields = []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
				Time: &now, FieldsType: "FieldsV1", FieldsV1: fields(map[string]any{"metadata": doc["metadata"], "spec": doc["spec"]})},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
				Time: &now, FieldsType: "FieldsV1", Subresource: "status",
				FieldsV1: fields(map[string]any{"status": map[string]any{"replicas": 1, "conditions": []any{map[string]any{"type": "Available", "status": "True"}}}})},
		}
		lastApplied(d, string(req.Object.Raw))
	})
}

// fieldSet is the FieldsV1 shape of a JSON value: f:<name> for members,
// i:<index> for list items, {} for leaves.
func fieldSet(v any) any {
	out := map[string]any{}
	switch v := v.(type) {
	case map[string]any:
		out["."] = map[string]any{}
		for k, e := range v {
			out["f:"+k] = fieldSet(e)
		}
	case []any:
		for i, e := range v {
			out[fmt.Sprintf("i:%d", i)] = fieldSet(e)
		}
	}
	return out
}
