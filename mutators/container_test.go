package mutators

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
)

// container builds a container with an image, a command line and, when
// gpus > 0, a GPU limit.
func container(name, image string, gpus int64, command ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: image, Command: command}
	if gpus > 0 {
		c.Resources.Limits = corev1.ResourceList{gpuResource: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return c
}

func TestResolveContainer(t *testing.T) {
	annos := field.NewPath("spec", "template", "metadata", "annotations")
	engine := func(e annotations.EngineName) annotations.Settings {
		return annotations.Settings{Serving: annotations.ServingSettings{Engine: e}}
	}
	metrics := container("metrics", "quay.io/prometheus/statsd-exporter:v0.26", 0)
	cases := map[string]struct {
		settings   annotations.Settings
		containers []corev1.Container
		want       int
		wantErr    string // the error's detail; empty for none
	}{
		"nothing to inject: no container": {
			containers: []corev1.Container{metrics, metrics}, want: NoContainer,
		},
		"the only container": {
			settings: engine(annotations.EngineVLLM), containers: []corev1.Container{metrics}, want: 0,
		},
		"the container the annotation names": {
			settings:   annotations.Settings{Container: "metrics", Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM}},
			containers: []corev1.Container{container("vllm", "vllm/vllm-openai:v0.8.5", 1), metrics}, want: 1,
		},
		"a named container that is not there": {
			settings:   annotations.Settings{Container: "server", GPU: annotations.GPUSettings{Count: 1}},
			containers: []corev1.Container{metrics, container("vllm", "vllm/vllm-openai:v0.8.5", 1)},
			want:       NoContainer, wantErr: "server (containers: metrics, vllm)",
		},
		// vLLM's Kubernetes docs: a vllm container with no GPU limit yet
		// (the profile adds it) beside a metrics sidecar.
		"vllm image beside a metrics sidecar, no GPUs declared": {
			settings:   engine(annotations.EngineVLLM),
			containers: []corev1.Container{metrics, container("server", "docker.io/vllm/vllm-openai:latest", 0)}, want: 1,
		},
		"vllm command in a generic image": {
			settings: engine(annotations.EngineVLLM),
			containers: []corev1.Container{metrics, container("server", "registry.example.com/ml/runtime:3", 0,
				"/bin/sh", "-c", "pip list; exec python3 -m vllm.entrypoints.openai.api_server --model /models")}, want: 1,
		},
		"the container's name suggests the engine": {
			settings:   engine(annotations.EngineTGI),
			containers: []corev1.Container{container("tgi", "registry.example.com/llm:2.4", 0), container("proxy", "envoyproxy/envoy:v1.31", 0)}, want: 0,
		},
		"text-generation-inference image": {
			settings: engine(annotations.EngineTGI),
			containers: []corev1.Container{container("auth", "registry.example.com/auth:1", 0),
				container("llm", "ghcr.io/huggingface/text-generation-inference:3.0", 0)}, want: 1,
		},
		"triton image with a digest and a registry port": {
			settings: engine(annotations.EngineTriton),
			containers: []corev1.Container{metrics,
				container("server", "registry.local:5000/nvidia/tritonserver@sha256:"+sha256Hex, 0)}, want: 1,
		},
		"an image beats a name": {
			settings: engine(annotations.EngineVLLM),
			containers: []corev1.Container{container("vllm-metrics", "quay.io/prometheus/statsd-exporter:v0.26", 0),
				container("engine", "vllm/vllm-openai:v0.8.5", 0)}, want: 1,
		},
		"two vllm images: the one with GPUs": {
			settings: engine(annotations.EngineVLLM),
			containers: []corev1.Container{container("router", "vllm/vllm-openai:v0.8.5", 0),
				container("engine", "vllm/vllm-openai:v0.8.5", 4)}, want: 1,
		},
		"two vllm images, neither with GPUs: ambiguous": {
			settings: engine(annotations.EngineVLLM),
			containers: []corev1.Container{container("a", "vllm/vllm-openai:v0.8.5", 0),
				container("b", "vllm/vllm-openai:v0.8.5", 0)},
			want:    NoContainer,
			wantErr: `the pod has 2 containers (a, b) and none or several run engine "vllm" (by image, command or name) and none or several request nvidia.com/gpu: name the one that serves the model`,
		},
		"no engine match: the only one with GPUs": {
			settings:   engine(annotations.EngineSGLang),
			containers: []corev1.Container{metrics, container("server", "registry.example.com/llm:1", 2)}, want: 1,
		},
		"custom engine: the only one with GPUs": {
			settings:   engine(annotations.EngineCustom),
			containers: []corev1.Container{container("vllm", "vllm/vllm-openai:v0.8.5", 0), container("server", "registry.example.com/llm:1", 2)}, want: 1,
		},
		"no engine, no GPUs: ambiguous": {
			settings:   annotations.Settings{GPU: annotations.GPUSettings{Count: 1}},
			containers: []corev1.Container{metrics, container("server", "vllm/vllm-openai:v0.8.5", 0)},
			want:       NoContainer,
			wantErr:    `the pod has 2 containers (metrics, server) and none or several request nvidia.com/gpu: name the one that serves the model`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := &corev1.PodSpec{Containers: tc.containers}
			got, err := ResolveContainer(spec, tc.settings, gpuResource, annos)
			if got != tc.want {
				t.Errorf("container %d, want %d", got, tc.want)
			}
			detail := ""
			if err != nil {
				detail = err.Detail
				if err.Type == field.ErrorTypeNotFound {
					detail, _ = err.BadValue.(string)
				}
				if err.Field != annos.Key(annotations.Container).String() {
					t.Errorf("error on %s", err.Field)
				}
			}
			if detail != tc.wantErr {
				t.Errorf("error %q, want %q", detail, tc.wantErr)
			}
		})
	}
}

const sha256Hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestEnginePort(t *testing.T) {
	cases := map[string]struct {
		engine annotations.EngineName
		c      corev1.Container
		want   int32
	}{
		"vllm --port in args": {
			engine: annotations.EngineVLLM,
			c:      corev1.Container{Args: []string{"--model", "org/m", "--port", "8080"}},
			want:   8080,
		},
		"vllm serve --port= in a shell, after ray's own --port": {
			engine: annotations.EngineVLLM,
			c: corev1.Container{Command: []string{"/bin/bash", "-c"},
				Args: []string{"ray start --head --port=6379 && vllm serve org/m --port=8001 --tensor-parallel-size 8"}},
			want: 8001,
		},
		"a shell that starts the engine some other way: unknown": {
			engine: annotations.EngineVLLM,
			c:      corev1.Container{Command: []string{"sh", "-c", "./start.sh --port 9000"}},
		},
		"the last --port wins; a later command's flags do not count": {
			engine: annotations.EngineSGLang,
			c: corev1.Container{Command: []string{"sh", "-c",
				"python3 -m sglang.launch_server --port 1 --host 0.0.0.0 --port 30001; sleep --port 5"}},
			want: 30001,
		},
		"tgi PORT env": {
			engine: annotations.EngineTGI,
			c:      corev1.Container{Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}},
			want:   8080,
		},
		"tgi --port wins over PORT": {
			engine: annotations.EngineTGI,
			c:      corev1.Container{Args: []string{"--model-id", "org/m", "--port", "3000"}, Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}},
			want:   3000,
		},
		"a port from a $(VAR) reference": {
			engine: annotations.EngineVLLM,
			c:      corev1.Container{Args: []string{"--port", "$(SERVE_PORT)"}, Env: []corev1.EnvVar{{Name: "SERVE_PORT", Value: "9000"}}},
			want:   9000,
		},
		"PORT from a Secret: unknown": {
			engine: annotations.EngineTGI,
			c: corev1.Container{Env: []corev1.EnvVar{{Name: "PORT", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{Key: "port"}}}}},
		},
		"vllm ignores PORT": {
			engine: annotations.EngineVLLM,
			c:      corev1.Container{Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}},
		},
		"triton --http-port": {
			engine: annotations.EngineTriton,
			c:      corev1.Container{Command: []string{"tritonserver", "--model-repository=/models", "--http-port=9000", "--grpc-port=9001"}},
			want:   9000,
		},
		"a flag's value naming the engine starts nothing": {
			engine: annotations.EngineTriton,
			c:      corev1.Container{Command: []string{"sh", "-c", "/opt/start --model-repository=/srv/tritonserver --http-port 9000"}},
		},
		"a port that is not a number": {
			engine: annotations.EngineVLLM,
			c:      corev1.Container{Args: []string{"--port", "http"}},
		},
		"custom engine: nothing known": {
			engine: annotations.EngineCustom,
			c:      corev1.Container{Args: []string{"--port", "8080"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := enginePort(&tc.c, tc.engine); got != tc.want {
				t.Errorf("enginePort = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestEngineGPUs(t *testing.T) {
	cases := map[string]struct {
		engine annotations.EngineName
		args   []string
		want   int64
	}{
		"none":                   {engine: annotations.EngineVLLM, args: []string{"serve", "org/m"}},
		"vllm -tp":               {engine: annotations.EngineVLLM, args: []string{"-tp", "8"}, want: 8},
		"vllm tensor x pipeline": {engine: annotations.EngineVLLM, args: []string{"--tensor-parallel-size=8", "--pipeline-parallel-size", "2"}, want: 16},
		"sglang --tp":            {engine: annotations.EngineSGLang, args: []string{"--tp", "4"}, want: 4},
		"tgi --num-shard":        {engine: annotations.EngineTGI, args: []string{"--num-shard=2"}, want: 2},
		"not a number":           {engine: annotations.EngineVLLM, args: []string{"-tp", "auto"}},
		"triton: no such flag":   {engine: annotations.EngineTriton, args: []string{"-tp", "8"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := corev1.Container{Args: tc.args}
			if got := engineGPUs(&c, tc.engine); got != tc.want {
				t.Errorf("engineGPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestImageRepository(t *testing.T) {
	got := map[string]string{}
	for _, image := range []string{
		"vllm/vllm-openai:v0.8.5", "docker.io/vllm/vllm-openai:latest", "nvcr.io/nvidia/tritonserver:24.08-py3",
		"registry.local:5000/tgi@sha256:" + sha256Hex, "localhost/sglang", "sglang",
	} {
		got[image] = imageRepository(image)
	}
	want := map[string]string{
		"vllm/vllm-openai:v0.8.5": "vllm/vllm-openai", "docker.io/vllm/vllm-openai:latest": "vllm/vllm-openai",
		"nvcr.io/nvidia/tritonserver:24.08-py3": "nvidia/tritonserver", "registry.local:5000/tgi@sha256:" + sha256Hex: "tgi",
		"localhost/sglang": "sglang", "sglang": "sglang",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("imageRepository (-want +got):\n%s", diff)
	}
}
