package mutators

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// Probes fit the container as published manifests write it: the port the
// engine really listens on, and a startup budget that covers what the
// manifest's own probes allow and what the model's size and GPUs need.
func TestServingProbesFitTheContainer(t *testing.T) {
	profile := func(s annotations.Settings, keys ...string) annotations.Settings {
		for _, k := range keys {
			s.Origins[k] = annotations.Origin{Path: field.NewPath("metadata", "annotations").Key(annotations.Profile), Profile: "serving"}
		}
		return s
	}
	eng := func(e annotations.EngineName) annotations.Settings {
		return explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: e}})
	}
	userProbe := func(delay, period, threshold int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/v2/health/live"}},
			InitialDelaySeconds: delay, PeriodSeconds: period, FailureThreshold: threshold}
	}
	tcp := func(name string, port int32) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP}
	}
	cases := map[string]struct {
		settings annotations.Settings
		c        corev1.Container
		// wantPort is the probes' port; wantDeclared whether modelgate
		// declares it; wantStartup the startup probe's failure threshold
		// (periods of 5 s).
		wantPort     int32
		wantDeclared bool
		wantStartup  int32
	}{
		"tgi with PORT=8080": {
			settings: eng(annotations.EngineTGI),
			c:        corev1.Container{Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}},
			wantPort: 8080, wantDeclared: true, wantStartup: 60,
		},
		"tgi declaring containerPort 8080": {
			settings: eng(annotations.EngineTGI),
			c:        corev1.Container{Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
			wantPort: 8080, wantStartup: 60,
		},
		"sglang --port in a shell command": {
			settings: eng(annotations.EngineSGLang),
			c: corev1.Container{Command: []string{"bash", "-c"},
				Args: []string{"python3 -m sglang.launch_server --model-path /models --host 0.0.0.0 --port 8000"}},
			wantPort: 8000, wantDeclared: true, wantStartup: 60,
		},
		"triton declaring http, grpc and metrics": {
			settings: eng(annotations.EngineTriton),
			c:        corev1.Container{Ports: []corev1.ContainerPort{tcp("http", 8000), tcp("grpc", 8001), tcp("metrics", 8002)}},
			wantPort: 8000, wantStartup: 60,
		},
		"vllm declaring only a metrics port: the preset": {
			settings: eng(annotations.EngineVLLM),
			c:        corev1.Container{Ports: []corev1.ContainerPort{tcp("metrics", 9400)}},
			wantPort: 8000, wantDeclared: true, wantStartup: 60,
		},
		"the annotation's port wins over PORT": {
			settings: explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineTGI, Port: 9000}}),
			c:        corev1.Container{Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}},
			wantPort: 9000, wantDeclared: true, wantStartup: 60,
		},
		"the container's port wins over a profile's": {
			settings: profile(explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 9000}}), annotations.Port),
			c:        corev1.Container{Ports: []corev1.ContainerPort{tcp("api", 8080)}},
			wantPort: 8080, wantStartup: 60,
		},
		"a profile's port over the preset": {
			settings: profile(explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, Port: 9000}}), annotations.Port),
			wantPort: 9000, wantDeclared: true, wantStartup: 60,
		},
		// Triton's published samples wait 600 s before their own probes.
		"triton whose own probes wait 600s": {
			settings: eng(annotations.EngineTriton),
			c: corev1.Container{ReadinessProbe: userProbe(600, 0, 0), LivenessProbe: userProbe(600, 10, 3),
				Ports: []corev1.ContainerPort{tcp("http", 8000)}},
			wantPort: 8000, wantStartup: 126, // 600 + 10 x 3
		},
		"an explicit warm-up below the user's liveness allowance": {
			settings: explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, WarmupTimeoutSeconds: 120}}),
			c:        corev1.Container{LivenessProbe: userProbe(900, 30, 5)},
			wantPort: 8000, wantDeclared: true, wantStartup: 210, // 900 + 30 x 5 = 1050 s
		},
		"8 GPUs: 300 + 7 x 120 s": {
			settings: eng(annotations.EngineVLLM),
			c:        container("vllm", "vllm/vllm-openai:v0.8.5", 8),
			wantPort: 8000, wantDeclared: true, wantStartup: 228,
		},
		"8 GPUs through DRA: the claim's count, as the limit's": {
			settings: explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM},
				GPU: annotations.GPUSettings{Count: 8, Allocation: annotations.AllocationDRA}}),
			c:        corev1.Container{Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "modelgate-gpu"}}}},
			wantPort: 8000, wantDeclared: true, wantStartup: 228,
		},
		"tensor parallel 8 x pipeline parallel 2 on the command line": {
			settings: eng(annotations.EngineVLLM),
			c: corev1.Container{Command: []string{"sh", "-c",
				"vllm serve meta-llama/Llama-3.1-405B-Instruct-FP8 --tensor-parallel-size 8 --pipeline-parallel-size 2"}},
			wantPort: 8000, wantDeclared: true, wantStartup: 420, // 300 + 15 x 120 = 2100 s
		},
		"a 140Gi model: 300 + 140 x 6 s": {
			settings: explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM},
				Model: modelSettings("hf://meta-llama/Llama-3.3-70B-Instruct", sized("140Gi"))}),
			wantPort: 8000, wantDeclared: true, wantStartup: 228,
		},
		"an explicit warm-up is not raised for the model": {
			settings: explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, WarmupTimeoutSeconds: 200},
				Model: modelSettings("hf://meta-llama/Llama-3.3-70B-Instruct", sized("140Gi"))}),
			c:        container("vllm", "vllm/vllm-openai:v0.8.5", 8),
			wantPort: 8000, wantDeclared: true, wantStartup: 40,
		},
		"a profile's warm-up is not raised either": {
			settings: profile(explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM, WarmupTimeoutSeconds: 200}}), annotations.WarmupTimeout),
			c:        container("vllm", "vllm/vllm-openai:v0.8.5", 8),
			wantPort: 8000, wantDeclared: true, wantStartup: 40,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			spec := tg.PodSpec
			spec.Containers = []corev1.Container{tc.c}
			spec.Containers[0].Name = "server"
			before := spec.Containers[0].DeepCopy()
			chain := Chain{ServingProbes{}}
			if _, err := chain.Apply(tg, &Input{Settings: tc.settings, Options: testOptions()}); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			applyAgain(t, chain, tg, &Input{Settings: tc.settings, Options: testOptions()})
			c := spec.Containers[0]
			if c.StartupProbe == nil {
				t.Fatal("no startup probe")
			}
			if got := c.StartupProbe.HTTPGet.Port.IntVal; got != tc.wantPort {
				t.Errorf("startup probe on port %d, want %d", got, tc.wantPort)
			}
			if before.ReadinessProbe == nil && c.ReadinessProbe.HTTPGet.Port.IntVal != tc.wantPort {
				t.Errorf("readiness probe on port %d, want %d", c.ReadinessProbe.HTTPGet.Port.IntVal, tc.wantPort)
			}
			if got := c.StartupProbe.FailureThreshold; got != tc.wantStartup {
				t.Errorf("startup failureThreshold %d (%d s), want %d", got, got*5, tc.wantStartup)
			}
			wantPorts := before.Ports
			if tc.wantDeclared {
				wantPorts = append(wantPorts, corev1.ContainerPort{Name: portName(before.Ports, []string{"http", "serving"}), ContainerPort: tc.wantPort, Protocol: corev1.ProtocolTCP})
			}
			if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before.LivenessProbe, c.LivenessProbe); diff != "" {
				t.Errorf("the user's liveness probe changed (-want +got):\n%s", diff)
			}
			if before.ReadinessProbe != nil {
				if diff := cmp.Diff(before.ReadinessProbe, c.ReadinessProbe); diff != "" {
					t.Errorf("the user's readiness probe changed (-want +got):\n%s", diff)
				}
			}
		})
	}
}
