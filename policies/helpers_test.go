package policies

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// module joins lines into a module, so cases can state positions plainly.
func module(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// mustCompile compiles a policy or fails the test.
func mustCompile(t testing.TB, p Policy) *Compiled {
	t.Helper()
	c, err := Compile(context.Background(), p)
	if err != nil {
		t.Fatalf("Compile(%s): %v", p.Name, err)
	}
	return c
}

// gpuWorkload returns the normalized view of a typical GPU Deployment
// serving a pinned Hugging Face model, per the input contract.
func gpuWorkload() map[string]any {
	container := func(name, image string, gpus int, serving bool) map[string]any {
		res := map[string]any{"limits": map[string]any{}, "requests": map[string]any{}}
		if gpus > 0 {
			res["limits"] = map[string]any{"nvidia.com/gpu": "1", "memory": "64Gi"}
			res["requests"] = map[string]any{"nvidia.com/gpu": "1"}
		}
		return map[string]any{
			"name": name, "image": image, "gpus": gpus, "resources": res,
			"securityContext": map[string]any{}, "privileged": false,
			"ports": []any{8000}, "readinessProbe": serving, "startupProbe": serving, "livenessProbe": false,
		}
	}
	return map[string]any{
		"kind": "Deployment", "apiVersion": "apps/v1", "name": "llama", "namespace": "team-a",
		"operation":   "CREATE",
		"labels":      map[string]any{"app": "llama", "modelgate.io/owner": "alice-example.com", "modelgate.io/team": "nlp"},
		"annotations": map[string]any{"modelgate.io/model": "hf://meta-llama/Llama-3.1-8B@0123456789abcdef0123456789abcdef01234567"},
		"podLabels":   map[string]any{"app": "llama"}, "podAnnotations": map[string]any{},
		"userInfo":        map[string]any{"username": "alice@example.com", "groups": []any{"system:authenticated"}, "uid": ""},
		"namespaceLabels": map[string]any{"modelgate.io/team": "nlp"},
		"owner":           "alice-example.com", "team": "nlp", "injected": true, "servingContainer": "vllm",
		"hostNetwork": false, "hostPID": false, "hostIPC": false,
		"containers": []any{
			container("vllm", "vllm/vllm-openai:v0.6.0", 1, true),
			container("metrics", "ghcr.io/modelgate/exporter:v1", 0, false),
		},
		"initContainers": []any{container("model-loader", "ghcr.io/modelgate/loader:v1", 0, false)},
		"gpu": map[string]any{
			"resource": "nvidia.com/gpu", "count": 1,
			"products": []any{"NVIDIA-A100-SXM4-80GB"}, "memoryMiB": 40960,
		},
		"model": map[string]any{
			"uri":    "hf://meta-llama/Llama-3.1-8B@0123456789abcdef0123456789abcdef01234567",
			"scheme": "hf", "bucket": "", "host": "", "path": "meta-llama/Llama-3.1-8B", "org": "meta-llama",
			"claim": "", "revision": "0123456789abcdef0123456789abcdef01234567", "tag": "", "digest": "", "pinned": true,
		},
		"engine": "vllm", "serving": true,
	}
}

// toValue converts a Go value to OPA's form or fails the test.
func toValue(t testing.TB, x any) ast.Value {
	t.Helper()
	v, err := ast.InterfaceToValue(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// observed is one call of an Observer.
type observed struct{ Policy, Decision string }

// recorder is an Observer that remembers its calls.
type recorder struct {
	mu    sync.Mutex
	calls []observed
}

func (r *recorder) Evaluated(policy, decision string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, observed{policy, decision})
}

// Cached records a cached decision as cached:<decision>.
func (r *recorder) Cached(policy, decision string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, observed{policy, "cached:" + decision})
}

var _ Observer = (*recorder)(nil)
