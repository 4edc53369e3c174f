package cluster

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// The published images of the table of engine facts are answered with
// their entrypoints and variables: vLLM's image runs `vllm serve`, TGI's
// listens on PORT 80 with its hub under HF_HOME=/data.
func TestEngineRepositories(t *testing.T) {
	got, err := EngineRepositories()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]EngineImage{
		TestEngineRepository:                    {},
		"vllm/vllm-openai":                      {Entrypoint: []string{"vllm", "serve"}},
		"lmsysorg/sglang":                       {},
		"huggingface/text-generation-inference": {Entrypoint: []string{"text-generation-launcher"}, Env: map[string]string{"HF_HOME": "/data", "PORT": "80"}},
		"nvidia/tritonserver":                   {},
		"nvidia/ai-dynamo/vllm-runtime":         {},
		"llm-d/llm-d-router-disagg-sidecar":     {Entrypoint: []string{"/app/pd-sidecar"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EngineRepositories (-want +got):\n%s", diff)
	}
}

func TestAsEngineImage(t *testing.T) {
	base, err := mutate.Config(empty.Image, v1.Config{Env: []string{"PATH=/usr/bin", "PORT=1"}, Cmd: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := asEngineImage(base, EngineImage{Entrypoint: []string{"text-generation-launcher"}, Env: map[string]string{"PORT": "80", "HF_HOME": "/data"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"text-generation-launcher"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"PATH=/usr/bin", "HF_HOME=/data", "PORT=80"}, cf.Config.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if cf.Config.Cmd != nil {
		t.Errorf("cmd %q, want none: the manifest's args follow the entrypoint", cf.Config.Cmd)
	}
}

// Any tag of an engine repository is answered with engineTag's manifest;
// other repositories' tags are asked for as they are.
func TestAnyEngineTag(t *testing.T) {
	tests := map[string]string{
		"/v2/vllm/vllm-openai/manifests/v0.23.0":                 "/v2/vllm/vllm-openai/manifests/latest",
		"/v2/nvidia/tritonserver/manifests/26.09-py3":            "/v2/nvidia/tritonserver/manifests/latest",
		"/v2/vllm/vllm-openai/manifests/sha256:abc":              "/v2/vllm/vllm-openai/manifests/sha256:abc",
		"/v2/acme/other/manifests/v1":                            "/v2/acme/other/manifests/v1",
		"/v2/llm-d/llm-d-router-disagg-sidecar/manifests/v0.9.0": "/v2/llm-d/llm-d-router-disagg-sidecar/manifests/latest",
	}
	engines, err := EngineRepositories()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range tests {
		t.Run(path, func(t *testing.T) {
			var got string
			h := anyEngineTag(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.URL.Path }), engines)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, path, nil))
			if got != want {
				t.Errorf("asked for %s, want %s", got, want)
			}
		})
	}
}
