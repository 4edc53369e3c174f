package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	gomodulespatch "gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook/decode"
)

// benchDeployment is a Deployment with a realistic amount of metadata.
func benchDeployment(o builders.Options) builders.Options {
	o.Labels = merged(o.Labels, map[string]string{
		"app.kubernetes.io/name": "llm-server", "app.kubernetes.io/part-of": "inference", "app.kubernetes.io/version": "1.0.0"})
	o.TemplateLabels = merged(o.TemplateLabels, map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "gpu"})
	o.TemplateAnnotations = merged(o.TemplateAnnotations, map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"})
	return o
}

// benchContext carries a logger that discards: the benchmarks time the
// review, not log output.
func benchContext() context.Context {
	return logf.IntoContext(context.Background(), logf.Log.WithSink(logf.NullLogSink{}))
}

func BenchmarkHandle(b *testing.B) {
	h := newHandler()
	ctx := benchContext()
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
			if resp := h.Handle(ctx, bc.req); !resp.Allowed || (len(patchesOf(resp)) > 0) != bc.patched {
				b.Fatalf("allowed=%v patches=%d, want allowed with patches=%v", resp.Allowed, len(patchesOf(resp)), bc.patched)
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

// vllmAnnotations are the annotations of a typical vLLM server: a Hugging
// Face model cached on disk, one A100 or H100.
func vllmAnnotations() map[string]string {
	return map[string]string{
		annotations.Inject:     "true",
		annotations.Model:      "hf://meta-llama/Llama-3.1-8B-Instruct",
		annotations.ModelSize:  "20Gi",
		annotations.Engine:     "vllm",
		annotations.GPU:        "1",
		annotations.GPUProduct: "NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3",
	}
}

// benchVLLM is a one-container vLLM Deployment with vllmAnnotations.
func benchVLLM() *appsv1.Deployment {
	d := object("Deployment", nsPlain, benchDeployment(builders.Options{TemplateAnnotations: vllmAnnotations()})).(*appsv1.Deployment)
	c := &d.Spec.Template.Spec.Containers[0]
	c.Name, c.Image = "vllm", "vllm/vllm-openai:v0.6.3"
	c.Args = []string{"--model=/models", "--served-model-name=llama-3.1-8b-instruct", "--max-model-len=8192"}
	c.Env = []corev1.EnvVar{{Name: "HF_HUB_OFFLINE", Value: "1"}}
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Gi")},
	}
	return d
}

// benchLarge is a big pod template: five containers of 50 variables each,
// two init containers and a node affinity of two terms, with the vLLM
// annotations naming the serving container.
func benchLarge() *appsv1.Deployment {
	d := benchVLLM()
	d.Spec.Template.Annotations[annotations.Container] = "vllm"
	spec := &d.Spec.Template.Spec
	server := spec.Containers[0]
	spec.Containers = nil
	for _, name := range []string{"auth-proxy", "vllm", "router", "metrics-exporter", "log-shipper"} {
		c := corev1.Container{Name: name, Image: "registry.example.com/platform/" + name + ":1.4.2"}
		if name == "vllm" {
			c = *server.DeepCopy()
		}
		for i := range 50 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("%s_SETTING_%02d", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), i),
				Value: fmt.Sprintf("value-%02d-of-a-realistic-length", i)})
		}
		spec.Containers = append(spec.Containers, c)
	}
	spec.InitContainers = []corev1.Container{
		{Name: "wait-for-registry", Image: "busybox:1.36", Command: []string{"sh", "-c", "until nslookup registry; do sleep 2; done"}},
		{Name: "fetch-config", Image: "registry.example.com/platform/config-fetcher:2.0", Args: []string{"--out=/config"}},
	}
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cloud.example.com/reserved-pool", Operator: corev1.NodeSelectorOpExists}}},
		}},
	}}
	return d
}

// benchObjects are the objects BenchmarkInject, BenchmarkGenericBaseline
// and BenchmarkMutateOnly admit.
var benchObjects = []struct {
	name string
	obj  func() *appsv1.Deployment
}{
	{name: "vllm-deployment", obj: benchVLLM},
	{name: "large-pod", obj: benchLarge},
}

// BenchmarkInject is the full review of an opted-in CREATE: decoding,
// parsing, the chain and the patch.
func BenchmarkInject(b *testing.B) {
	h := newHandler()
	ctx := benchContext()
	for _, bo := range benchObjects {
		b.Run(bo.name, func(b *testing.B) {
			req := create(b, bo.obj(), alice)
			if resp := h.Handle(ctx, req); !resp.Allowed || len(patchesOf(resp)) == 0 {
				b.Fatalf("allowed=%v patches=%d result=%+v, want an allowed patch", resp.Allowed, len(patchesOf(resp)), resp.Result)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(req.Object.Raw)))
			for b.Loop() {
				h.Handle(ctx, req)
			}
		})
	}
}

// BenchmarkGenericBaseline is what a generic injector does from a decoded
// object to patch bytes: marshal it, run the chain, marshal it again, diff
// the two documents (gomodules.xyz/jsonpatch, as controller-runtime does)
// and marshal the operations. Decoding is not timed.
func BenchmarkGenericBaseline(b *testing.B) {
	for _, bo := range benchObjects {
		b.Run(bo.name, func(b *testing.B) {
			f := newFreshObjects(b, bo.obj())
			b.ReportAllocs()
			for b.Loop() {
				d, in := f.next()
				before, err := json.Marshal(d.Obj)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := benchChain.Apply(d.Target, in); err != nil {
					b.Fatal(err)
				}
				after, err := json.Marshal(d.Obj)
				if err != nil {
					b.Fatal(err)
				}
				ops, err := gomodulespatch.CreatePatch(before, after)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(ops); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTargeted is what the handler does from decoded object to patch
// bytes: snapshot the mutable sections, run the chain, build the patch from
// the sections that changed, encode it. Compare with BenchmarkGenericBaseline
// in the same run.
func BenchmarkTargeted(b *testing.B) {
	for _, bo := range benchObjects {
		b.Run(bo.name, func(b *testing.B) {
			f := newFreshObjects(b, bo.obj())
			b.ReportAllocs()
			for b.Loop() {
				d, in := f.next()
				snap := takeSnapshot(d.Target, in.Container, mutators.PreviousRecord(d.Target, in))
				if _, err := benchChain.Apply(d.Target, in); err != nil {
					b.Fatal(err)
				}
				ops := buildPatch(snap, d.Target, d.Paths)
				if len(ops) == 0 {
					b.Fatal("no patch")
				}
				if _, err := encodePatch(ops); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMutateOnly runs only the chain over a freshly decoded object:
// with BenchmarkGenericBaseline it splits the cost between mutating and
// patching. Decoding is not timed.
func BenchmarkMutateOnly(b *testing.B) {
	for _, bo := range benchObjects {
		b.Run(bo.name, func(b *testing.B) {
			f := newFreshObjects(b, bo.obj())
			b.ReportAllocs()
			for b.Loop() {
				d, in := f.next()
				if _, err := benchChain.Apply(d.Target, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchChain is the handler's chain for a full injection.
var benchChain = mutators.Chain{mutators.OwnerMetadata{}, mutators.ModelLoader{}, mutators.GPUPlacement{}, mutators.ServingProbes{}}

// freshObjects hands out freshly decoded copies of one object, with the
// Input the handler would build for it. Copies are decoded with the timer
// stopped, in small batches: stopping the timer costs little per
// iteration, and few copies wait in the heap at a time.
type freshObjects struct {
	b    *testing.B
	raw  []byte
	in   mutators.Input
	pool []*decode.Object
}

func newFreshObjects(b *testing.B, obj *appsv1.Deployment) *freshObjects {
	b.Helper()
	f := &freshObjects{b: b, raw: toJSON(b, obj)}
	d := f.decode()
	settings, errs := annotations.Parse(annotations.Source{Annotations: d.Target.Object.Annotations},
		annotations.Source{Annotations: d.Target.PodMeta().Annotations})
	if len(errs) > 0 {
		b.Fatalf("parsing the annotations: %v", errs)
	}
	opts := mutatorOptions(config.New())
	idx, ferr := mutators.ResolveContainer(d.Target.PodSpec, settings, opts.GPU.ResourceName, field.NewPath("metadata"))
	if ferr != nil {
		b.Fatalf("resolving the serving container: %v", ferr)
	}
	f.in = mutators.Input{Operation: mutators.Create, Namespace: nsPlain, NamespaceLabels: testNamespaces[nsPlain],
		Requester: mutators.Requester{Username: alice}, Settings: settings, Container: idx, Options: opts}
	if res, err := benchChain.Apply(d.Target, f.input()); err != nil || len(res.Changed) != len(benchChain) {
		b.Fatalf("chain changed %v (error %v), want every mutator", res.Changed, err)
	}
	return f
}

func (f *freshObjects) decode() *decode.Object {
	d, err := decode.Whole[gvks["Deployment"]](f.raw)
	if err != nil {
		f.b.Fatal(err)
	}
	return d
}

func (f *freshObjects) input() *mutators.Input {
	in := f.in
	return &in
}

func (f *freshObjects) next() (*decode.Object, *mutators.Input) {
	if len(f.pool) == 0 {
		f.b.StopTimer()
		for range 16 {
			f.pool = append(f.pool, f.decode())
		}
		f.b.StartTimer()
	}
	d := f.pool[len(f.pool)-1]
	f.pool = f.pool[:len(f.pool)-1]
	return d, f.input()
}
