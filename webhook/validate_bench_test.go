package webhook

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// samplePolicies reads the shipped library as its sample WorkloadPolicies
// (config/samples/policies), with their realistic parameters.
func samplePolicies(tb testing.TB) []*policyv1.WorkloadPolicy {
	tb.Helper()
	out, err := builders.SamplePolicies("../config/samples/policies")
	if err != nil {
		tb.Fatal(err)
	}
	if len(out) != 8 {
		tb.Fatalf("%d sample policies, want the library's 8", len(out))
	}
	return out
}

// libraryEngine is an engine holding the whole library.
func libraryEngine(tb testing.TB) *policies.Engine {
	tb.Helper()
	return engineOf(tb, samplePolicies(tb))
}

// injectedReview is the validating review of a typical GPU Deployment: the
// vLLM Deployment as the mutating webhook left it.
func injectedReview(tb testing.TB) admission.Request {
	tb.Helper()
	h := newHandler()
	a := map[string]string{
		"modelgate.io/inject": "true", "modelgate.io/model": "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
		"modelgate.io/gpu": "1", "modelgate.io/gpu-product": "NVIDIA-H100-80GB-HBM3", "modelgate.io/engine": "vllm",
	}
	req := create(tb, object("Deployment", nsPlain, benchDeployment(builders.Options{TemplateAnnotations: a})), alice)
	resp := h.Handle(context.Background(), req)
	if !resp.Allowed {
		tb.Fatalf("mutation denied: %v", resp.Result)
	}
	return request("Deployment", admissionv1.Create, nsPlain, applyPatch(tb, req.Object.Raw, resp), nil, alice)
}

// BenchmarkValidateLibrary is one validating review of a typical GPU
// Deployment under the whole shipped library (8 policies), from the
// admission request to the answer: decode, parse the annotations, build the
// workload view and its OPA value once, evaluate every prepared policy.
// Compare with BenchmarkValidateLibraryNaive in the same run.
func BenchmarkValidateLibrary(b *testing.B) {
	benchValidate(b, NewValidating(config.New(), libraryEngine(b), testNamespaces, NewPolicyMetrics(nil)), injectedReview(b))
}

// BenchmarkValidateLibraryNaive is the naive baseline: for each policy, on
// each request, rego.New(...).Eval with the input decoded from JSON (the
// same input the engine builds, as JSON), no prepared queries.
func BenchmarkValidateLibraryNaive(b *testing.B) {
	req := injectedReview(b)
	// The same input document the engine evaluates, as JSON: the view via
	// the handler's own path, the raw objects and each policy's parameters.
	h := NewValidating(config.New(), policies.NewEngine(policies.Options{}), testNamespaces, NewPolicyMetrics(nil))
	view := captureView(b, h, req)
	type naive struct {
		module, query string
		params        json.RawMessage
	}
	var ps []naive
	for _, wp := range samplePolicies(b) {
		mod, err := ast.ParseModuleWithOpts(wp.Name+".rego", wp.Spec.Rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			b.Fatal(err)
		}
		params := json.RawMessage("{}")
		if wp.Spec.Parameters != nil {
			params = wp.Spec.Parameters.Raw
		}
		ps = append(ps, naive{module: wp.Spec.Rego, query: mod.Package.Path.String() + ".deny", params: params})
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range ps {
			doc := `{"workload":` + string(view) + `,"object":` + string(req.Object.Raw) + `,"oldObject":null,"parameters":` + string(p.params) + `}`
			var input any
			if err := json.Unmarshal([]byte(doc), &input); err != nil {
				b.Fatal(err)
			}
			rs, err := rego.New(rego.Query(p.query), rego.Module("policy.rego", p.module), rego.Input(input)).Eval(ctx)
			if err != nil || len(rs) != 1 {
				b.Fatalf("eval: %v (%d results)", err, len(rs))
			}
		}
	}
}

// captureView returns input.workload, as JSON, for the request: a policy
// that denies with the whole view as its message hands it back.
func captureView(tb testing.TB, h *Validating, req admission.Request) []byte {
	tb.Helper()
	c, err := policies.Compile(context.Background(), policies.Policy{Name: "echo",
		Module: "package echo\n\ndeny contains json.marshal(input.workload)\n"})
	if err != nil {
		tb.Fatal(err)
	}
	h.checker.Engine.Swap(policies.NewSet(c))
	resp := h.Handle(context.Background(), req)
	if resp.Allowed {
		tb.Fatal("the echo policy did not answer")
	}
	return []byte(strings.TrimPrefix(resp.Result.Message, "[echo] "))
}

// libraryWorkload is the handler under the library and the workload it
// judges in injectedReview, decoded.
func libraryWorkload(b *testing.B) (*Validating, *validators.Workload) {
	b.Helper()
	req := injectedReview(b)
	d, err := decode.Whole[req.Kind](req.Object.Raw)
	if err != nil {
		b.Fatal(err)
	}
	h := NewValidating(config.New(), libraryEngine(b), testNamespaces, NewPolicyMetrics(nil))
	return h, h.workload(req, d, testNamespaces[nsPlain])
}

// BenchmarkEvaluateLibrary is the policy evaluation alone: the whole
// library over the workload view of the same review, the view built and
// converted to OPA's value form once per iteration as the handler does,
// without decoding the admission request.
func BenchmarkEvaluateLibrary(b *testing.B) {
	h, w := libraryWorkload(b)
	ctx := benchContext()
	if dec := h.checker.Check(ctx, w); !dec.Allowed() || len(dec.Results) != 8 {
		b.Fatalf("allowed=%v results=%d, want 8 results allowing", dec.Allowed(), len(dec.Results))
	}
	b.ReportAllocs()
	for b.Loop() {
		h.checker.Check(ctx, w)
	}
}

// BenchmarkEvaluateLibraryOPA is OPA's part of a first review: the
// library's combined query on the review's input already built as OPA's
// value (the view of the same Deployment, converted once before the
// loop), with the matching and the reading of the results around it. No
// handler can judge the review for less with these policies and this
// evaluator: the floor BenchmarkValidateLibrary is measured against.
func BenchmarkEvaluateLibraryOPA(b *testing.B) {
	h, w := libraryWorkload(b)
	view := policyview.Build(policyview.Source{
		Kind: w.Kind, APIVersion: w.APIVersion, Operation: w.Operation, Object: w.Object, PodMeta: w.PodMeta,
		PodSpec: w.PodSpec, Settings: w.Settings, ServingContainer: w.ServingContainer, UserInfo: w.UserInfo,
		NamespaceLabels: w.NamespaceLabels, GPU: h.checker.GPU, Sealed: h.checker.Seal.Verify(w.Namespace, w.Object),
	})
	engine := h.checker.Engine
	set := engine.Set()
	r := policies.Review{Kind: w.Kind, Namespace: w.Namespace, NamespaceLabels: w.NamespaceLabels,
		Workload: view.ValueOf(set.ReadsWorkloadKey)}
	ctx := benchContext()
	if dec := engine.Evaluate(ctx, r); !dec.Allowed() || len(dec.Results) != 8 {
		b.Fatalf("allowed=%v results=%d, want 8 results allowing", dec.Allowed(), len(dec.Results))
	}
	b.ReportAllocs()
	for b.Loop() {
		engine.Evaluate(ctx, r)
	}
}
