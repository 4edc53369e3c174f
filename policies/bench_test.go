package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// benchDir holds 8 small realistic policies, one of which (gpu-budget)
// reads input.object.
const benchDir = "testdata/bench"

// deploymentJSON is a typical GPU Deployment as admitted.
const deploymentJSON = `{
 "apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "llama", "namespace": "team-a",
  "labels": {"app": "llama", "modelgate.io/owner": "alice-example.com", "modelgate.io/team": "nlp"},
  "annotations": {"modelgate.io/model": "hf://meta-llama/Llama-3.1-8B@0123456789abcdef0123456789abcdef01234567",
   "modelgate.io/engine": "vllm"}},
 "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llama"}},
  "template": {"metadata": {"labels": {"app": "llama"}},
   "spec": {
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
     {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A100-SXM4-80GB"]}]}]}}},
    "initContainers": [{"name": "model-loader", "image": "ghcr.io/modelgate/loader:v1",
     "args": ["--uri", "hf://meta-llama/Llama-3.1-8B", "--dest", "/models"],
     "volumeMounts": [{"name": "models", "mountPath": "/models"}]}],
    "containers": [
     {"name": "vllm", "image": "vllm/vllm-openai:v0.6.0",
      "args": ["--model", "/models/Llama-3.1-8B", "--port", "8000"],
      "ports": [{"containerPort": 8000, "name": "http"}],
      "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "64Gi"}, "requests": {"nvidia.com/gpu": "1", "cpu": "8"}},
      "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10},
      "startupProbe": {"httpGet": {"path": "/health", "port": 8000}, "failureThreshold": 60},
      "volumeMounts": [{"name": "models", "mountPath": "/models"}, {"name": "shm", "mountPath": "/dev/shm"}]},
     {"name": "metrics", "image": "ghcr.io/modelgate/exporter:v1", "ports": [{"containerPort": 9400}]}],
    "volumes": [{"name": "models", "emptyDir": {}}, {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}}}`

// loadBench loads benchDir, or only the policies that do not read the raw
// objects.
func loadBench(b *testing.B, withObjects bool) []*Compiled {
	b.Helper()
	cs, errs := LoadDir(context.Background(), benchDir)
	if len(errs) > 0 || len(cs) != 8 {
		b.Fatalf("LoadDir(%s): %d policies, errors %v", benchDir, len(cs), errs)
	}
	if withObjects {
		return cs
	}
	var out []*Compiled
	for _, c := range cs {
		if !c.NeedsObjects() {
			out = append(out, c)
		}
	}
	return out
}

// benchReview is the review of deploymentJSON; the workload view is
// converted per review, as the webhook does.
func benchReview(b *testing.B, wl map[string]any) Review {
	v, err := ast.InterfaceToValue(wl)
	if err != nil {
		b.Fatal(err)
	}
	return Review{Kind: "Deployment", Namespace: "team-a", Workload: v, Object: []byte(deploymentJSON)}
}

// benchWant is what the bench policies say about deploymentJSON.
var benchWant = []string{"[gpu-products] GPU product NVIDIA-A100-SXM4-80GB is not allowed in namespace team-a"}

func BenchmarkEvaluate(b *testing.B) {
	wl := gpuWorkload()
	wl["gpu"].(map[string]any)["products"] = []any{"NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"}
	for _, bc := range []struct {
		name        string
		withObjects bool
		separate    bool
	}{
		{"8-policies", true, false}, {"8-policies/separate", true, true},
		{"7-policies-without-object", false, false}, {"7-policies-without-object/separate", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := NewEngine(Options{SeparateQueries: bc.separate})
			e.Swap(NewSet(loadBench(b, bc.withObjects)...))
			e.Set().Prepare(context.Background())
			ctx := context.Background()
			d := e.Evaluate(ctx, benchReview(b, wl))
			want := strings.Replace(benchWant[0], "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4", 1)
			if diff := cmp.Diff([]string{want}, d.Denials()); diff != "" {
				b.Fatalf("denials (-want +got):\n%s", diff)
			}
			b.ReportAllocs()
			for b.Loop() {
				d := e.Evaluate(ctx, benchReview(b, wl))
				if len(d.Results) != e.Set().Len() {
					b.Fatalf("%d results", len(d.Results))
				}
			}
		})
	}
}

// BenchmarkNaive is the obvious way for comparison: per request, decode
// the input JSON, then per policy build, compile and evaluate a query.
func BenchmarkNaive(b *testing.B) {
	type naive struct{ pkg, file, src string }
	var policies []naive
	params := map[string]any{}
	for _, c := range loadBench(b, true) {
		src, err := os.ReadFile(c.Filename())
		if err != nil {
			b.Fatal(err)
		}
		mod := ast.MustParseModuleWithOpts(string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
		pkg := mod.Package.Path.String()
		policies = append(policies, naive{pkg, filepath.Base(c.Filename()), string(src)})
		p, err := ast.JSON(c.params.Value)
		if err != nil {
			b.Fatal(err)
		}
		params[pkg] = p
	}
	raw, err := json.Marshal(map[string]any{
		"workload": gpuWorkload(), "object": json.RawMessage(deploymentJSON), "oldObject": nil,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			b.Fatal(err)
		}
		for _, p := range policies {
			input := map[string]any{"workload": doc["workload"], "object": doc["object"],
				"oldObject": doc["oldObject"], "parameters": params[p.pkg]}
			rs, err := rego.New(
				rego.Query(p.pkg),
				rego.Module(p.file, p.src),
				rego.Input(input),
			).Eval(ctx)
			if err != nil || len(rs) != 1 {
				b.Fatalf("%s: %v, %d results", p.pkg, err, len(rs))
			}
		}
	}
}

func benchCompile(b *testing.B, n int) {
	var ps []Policy
	for i := range n {
		c := loadBench(b, true)[i%8]
		src, err := os.ReadFile(c.Filename())
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, Policy{Name: fmt.Sprintf("%s-%d", c.Name(), i), Module: string(src), Action: c.Action()})
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cs := make([]*Compiled, 0, n)
		for _, p := range ps {
			c, err := Compile(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			cs = append(cs, c)
		}
		if NewSet(cs...).Len() != n {
			b.Fatal("short set")
		}
	}
}

func BenchmarkCompile8(b *testing.B)   { benchCompile(b, 8) }
func BenchmarkCompile100(b *testing.B) { benchCompile(b, 100) }

// BenchmarkPrepare100 is what Set.Prepare costs, in the background, after
// a change to 100 policies: compiling them together and preparing the
// query for the reviews all of them apply to.
func BenchmarkPrepare100(b *testing.B) {
	var cs []*Compiled
	for i := range 100 {
		c := loadBench(b, true)[i%8]
		src, err := os.ReadFile(c.Filename())
		if err != nil {
			b.Fatal(err)
		}
		cs = append(cs, mustCompile(b, Policy{Name: fmt.Sprintf("%s-%d", c.Name(), i), Module: string(src)}))
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := NewSet(cs...)
		s.Prepare(ctx)
		if len(s.combined.queries) != 1 {
			b.Fatal("not prepared")
		}
	}
}
