package webhook

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/modelgate/modelgate/test/builders"
)

// benchDeployment is a Deployment with a realistic amount of metadata.
func benchDeployment(o builders.Options) builders.Options {
	o.Labels = merged(o.Labels, map[string]string{
		"app.kubernetes.io/name": "llm-server", "app.kubernetes.io/part-of": "inference", "app.kubernetes.io/version": "1.0.0"})
	o.TemplateLabels = merged(o.TemplateLabels, map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "gpu"})
	o.TemplateAnnotations = merged(o.TemplateAnnotations, map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"})
	return o
}

func BenchmarkHandle(b *testing.B) {
	h := newHandler()
	ctx := context.Background()
	optedIn := create(b, object("Deployment", nsPlain, benchDeployment(builders.Options{Annotations: optIn})), alice)
	injected := request("Deployment", optedIn.Operation, nsPlain,
		applyPatch(b, optedIn.Object.Raw, h.Handle(ctx, optedIn)), nil, alice)
	cases := []struct {
		name    string
		req     admission.Request
		patched bool
	}{
		{name: "opted-in", req: optedIn, patched: true},
		{name: "already-injected", req: injected},
		{name: "not-opted-in", req: create(b, object("Deployment", nsPlain, benchDeployment(builders.Options{})), alice)},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			if resp := h.Handle(ctx, bc.req); !resp.Allowed || (len(resp.Patches) > 0) != bc.patched {
				b.Fatalf("allowed=%v patches=%d, want allowed with patches=%v", resp.Allowed, len(resp.Patches), bc.patched)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.req.Object.Raw)))
			for b.Loop() {
				h.Handle(ctx, bc.req)
			}
		})
	}
}

// BenchmarkBaselineDecodeOnly is the floor under BenchmarkHandle: decoding
// the same opted-in Deployment once, with nothing else.
func BenchmarkBaselineDecodeOnly(b *testing.B) {
	raw := toJSON(b, object("Deployment", nsPlain, benchDeployment(builders.Options{Annotations: optIn})))
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		var d appsv1.Deployment
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &d); err != nil {
			b.Fatal(err)
		}
	}
}
