package aiinference

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/offline"
)

// sampleV1 is config/samples' v1 AIInference, as the defaulter leaves it
// (the engine's preset port).
func sampleV1(t *testing.T) *servingv1.AIInference {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "serving_v1_aiinference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ai servingv1.AIInference
	if err := yaml.UnmarshalStrict(b, &ai); err != nil {
		t.Fatal(err)
	}
	if ai.Spec.Engine.Port == 0 {
		ai.Spec.Engine.Port = 30000 // SGLang's preset
	}
	return &ai
}

// TestDeploymentThroughTheWebhook builds the Deployment of the v1 sample
// and of an hf:// vLLM model, admits each through the mutating and
// validating handlers (offline, the webhook's own code), and
// checks that the webhook accepts every annotation the controller writes,
// injects the loader and GPU placement once, and keeps every field the
// controller wrote.
func TestDeploymentThroughTheWebhook(t *testing.T) {
	vllm := &servingv1.AIInference{}
	vllm.Name, vllm.Namespace = "llama", "team-a"
	vllm.Spec = servingv1.AIInferenceSpec{
		Model:    servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "0e9e39f249a16976918f6564b8830bc894c89659"},
		Engine:   servingv1.EngineSpec{Name: servingv1.EngineVLLM, Port: 8000, Args: []string{"--max-model-len", "8192"}},
		GPU:      &servingv1.GPUSpec{Count: 1, Products: []string{"NVIDIA-A100-SXM4-80GB"}, MinMemoryMiB: 40000},
		Replicas: ptr.To[int32](2),
		Warmup:   &servingv1.WarmupSpec{TimeoutSeconds: 900},
	}
	cfg := config.New()
	admitter, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, nil), offline.Namespaces{})
	if err != nil {
		t.Fatal(err)
	}
	for name, ai := range map[string]*servingv1.AIInference{"the v1 sample (SGLang)": sampleV1(t), "vLLM from the Hub": vllm} {
		t.Run(name, func(t *testing.T) {
			built, err := Deployment(ai, DefaultEngines)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Deployment(ai, DefaultEngines)
			if !equality.Semantic.DeepEqual(built, again) {
				t.Error("building twice from the same AIInference differs")
			}
			raw, err := json.Marshal(built)
			if err != nil {
				t.Fatal(err)
			}
			user := authenticationv1.UserInfo{Username: "system:serviceaccount:modelgate-system:modelgate"}
			out, err := admitter.Admit(context.Background(), offline.Request{Object: raw, Namespace: ai.Namespace, User: user})
			if err != nil {
				t.Fatal(err)
			}
			if out.Decision != offline.Allowed || !out.Mutated {
				t.Fatalf("decision %v, mutated %v, denials %v: the webhook must accept and decorate it", out.Decision, out.Mutated, out.Denials)
			}
			var got appsv1.Deployment
			if err := json.Unmarshal(out.Object, &got); err != nil {
				t.Fatal(err)
			}
			pod := got.Spec.Template.Spec
			if n := countInit(pod, mutators.ModelLoaderName); n != 1 {
				t.Errorf("%d model-loader init containers, want 1", n)
			}
			server := container(pod, ServingContainer)
			want := built.Spec.Template.Spec.Containers[0]
			if server == nil {
				t.Fatal("the serving container is gone")
			}
			if server.Image != want.Image || !slices.Equal(server.Args, want.Args) || !slices.Equal(server.Command, want.Command) {
				t.Errorf("the webhook changed the engine's image, command or args:\n got %s %v %v\nwant %s %v %v",
					server.Image, server.Command, server.Args, want.Image, want.Command, want.Args)
			}
			for k, v := range want.Resources.Requests {
				if got := server.Resources.Requests[k]; got.Cmp(v) != 0 {
					t.Errorf("request %s = %s, the spec says %s", k, got.String(), v.String())
				}
			}
			gpus := server.Resources.Limits[corev1.ResourceName(cfg.Injection.GPU.ResourceName)]
			if gpus.Cmp(*resource.NewQuantity(int64(ai.Spec.GPU.Count), resource.DecimalSI)) != 0 {
				t.Errorf("GPU limit %s, the spec asks for %d", gpus.String(), ai.Spec.GPU.Count)
			}
			if server.StartupProbe == nil || server.ReadinessProbe == nil {
				t.Error("no serving probes")
			}
			if got.Spec.Template.Spec.Affinity == nil || got.Spec.Template.Spec.Affinity.NodeAffinity == nil {
				t.Error("no GPU node affinity")
			}
			if !equality.Semantic.DeepEqual(got.Spec.Selector, built.Spec.Selector) || got.Spec.Replicas == nil || *got.Spec.Replicas != *ai.Spec.Replicas {
				t.Errorf("selector or replicas changed: %v %v", got.Spec.Selector, got.Spec.Replicas)
			}
			if strings.HasPrefix(ai.Spec.Model.URI, "hf://") {
				if !slices.Contains(server.Args, strings.TrimPrefix(ai.Spec.Model.URI, "hf://")) {
					t.Errorf("the engine is not pointed at the repository: %v", server.Args)
				}
				if env(server, "HF_HUB_CACHE") == "" {
					t.Error("no HF_HUB_CACHE: the engine would not find the loaded model")
				}
			}

			// Injection exactly once: admitting the result again changes nothing.
			second, err := admitter.Admit(context.Background(), offline.Request{Object: out.Object, Namespace: ai.Namespace, User: user})
			if err != nil {
				t.Fatal(err)
			}
			if second.Mutated {
				t.Error("admitting the decorated Deployment again patched it")
			}
		})
	}
}

func TestDeploymentErrors(t *testing.T) {
	ai := &servingv1.AIInference{}
	ai.Name = "x"
	ai.Spec.Engine = servingv1.EngineSpec{Name: servingv1.EngineCustom, Port: 9000}
	if _, err := Deployment(ai, DefaultEngines); err == nil || !strings.Contains(err.Error(), "spec.engine.image") {
		t.Errorf("a custom engine without an image: %v, want an error naming spec.engine.image", err)
	}
	ai.Spec.Engine = servingv1.EngineSpec{Name: servingv1.EngineVLLM}
	if _, err := Deployment(ai, DefaultEngines); err == nil || !strings.Contains(err.Error(), "spec.engine.port") {
		t.Errorf("no port: %v, want an error naming spec.engine.port", err)
	}
}

func TestService(t *testing.T) {
	ai := sampleV1(t)
	s := Service(ai)
	if s.Spec.Selector[InferenceLabel] != ai.Name || len(s.Spec.Ports) != 2 || s.Spec.Ports[1].Port != 30000 {
		t.Errorf("service %+v", s.Spec)
	}
	d, err := Deployment(ai, DefaultEngines)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the Pods do not carry", k, v)
		}
	}
}

func countInit(p corev1.PodSpec, name string) int {
	n := 0
	for _, c := range p.InitContainers {
		if c.Name == name {
			n++
		}
	}
	return n
}

func container(p corev1.PodSpec, name string) *corev1.Container {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

func env(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestOwnerCarriedToTheDeployment: the owner modelgate sealed on an
// AIInference (its creator) is the owner of the Deployment the controller
// writes as modelgate's service account; an owner edited onto the
// AIInference afterwards, which the seal does not cover, is not passed on;
// and anyone else writing the same Deployment is its owner themselves.
func TestOwnerCarriedToTheDeployment(t *testing.T) {
	cfg := config.New()
	admitter, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, nil), offline.Namespaces{})
	if err != nil {
		t.Fatal(err)
	}
	controller := authenticationv1.UserInfo{Username: cfg.ControllerUsername()}
	ai := sampleV1(t)
	ai.APIVersion, ai.Kind = servingv1.GroupVersion.String(), "AIInference"
	raw, err := json.Marshal(ai)
	if err != nil {
		t.Fatal(err)
	}
	out, err := admitter.Admit(context.Background(), offline.Request{Object: raw, Namespace: ai.Namespace,
		User: authenticationv1.UserInfo{Username: "alice@example.com"}})
	if err != nil || out.Decision != offline.Allowed {
		t.Fatalf("admitting the AIInference: %v %v %v", err, out.Decision, out.Denials)
	}
	admitted := &servingv1.AIInference{}
	if err := json.Unmarshal(out.Object, admitted); err != nil {
		t.Fatal(err)
	}
	owner := admitted.Labels[annotations.OwnerLabel]
	if owner == "" {
		t.Fatal("the AIInference got no owner")
	}
	deploymentOwner := func(ai *servingv1.AIInference, user authenticationv1.UserInfo) (string, string) {
		t.Helper()
		got, _ := admittedDeployment(t, admitter, ai, user)
		return got.Labels[annotations.OwnerLabel], got.Spec.Template.Labels[annotations.OwnerLabel]
	}
	if o, p := deploymentOwner(admitted, controller); o != owner || p != owner {
		t.Errorf("Deployment owner %q, its Pods' %q; want the AIInference's creator %q", o, p, owner)
	}
	forged := admitted.DeepCopy()
	forged.Labels[annotations.OwnerLabel] = "mallory"
	if o, p := deploymentOwner(forged, controller); o == "mallory" || p == "mallory" {
		t.Errorf("an owner edited onto the AIInference, unsealed, reached the Deployment (%q, Pods %q)", o, p)
	}
	if o, _ := deploymentOwner(admitted, authenticationv1.UserInfo{Username: "bob"}); o != "bob" {
		t.Errorf("Deployment written by bob has owner %q: only modelgate's service account passes an owner on", o)
	}
}

// TestEnginePresetEnv: a preset's environment comes first, with its
// placeholders filled; the AIInference's own variable of the same name
// wins.
func TestEnginePresetEnv(t *testing.T) {
	ai := sampleV1(t)
	ai.Spec.Engine.Name = servingv1.EngineCustom
	ai.Spec.Engine.Image = ""
	ai.Spec.Engine.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
	engines := map[servingv1.EngineName]Engine{servingv1.EngineCustom: {
		Image: "registry.example/engine:1",
		Args:  []string{"serve", "{{model}}"},
		Env:   []corev1.EnvVar{{Name: "PORT", Value: "{{port}}"}, {Name: "LOG_LEVEL", Value: "info"}},
	}}
	d, err := Deployment(ai, engines)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	want := []corev1.EnvVar{{Name: "PORT", Value: strconv.Itoa(int(ai.Spec.Engine.Port))}, {Name: "LOG_LEVEL", Value: "debug"}}
	if diff := cmp.Diff(want, c.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	repo := strings.TrimPrefix(ai.Spec.Model.URI, "hf://")
	if c.Image != "registry.example/engine:1" || !slices.Equal(c.Args[:2], []string{"serve", repo}) {
		t.Errorf("image %s args %v: want the preset's, pointed at %s", c.Image, c.Args, repo)
	}
}

func TestModelArgumentPerEngine(t *testing.T) {
	cases := map[string]struct {
		engine servingv1.EngineName
		uri    string
		want   []string
	}{
		"vllm: an hf:// model by its repository": {engine: servingv1.EngineVLLM, uri: "hf://acme/llm",
			want: []string{"acme/llm", "--port", "8000"}},
		"sglang: an s3:// model by its mount": {engine: servingv1.EngineSGLang, uri: "s3://models/llm",
			want: []string{"/models", "--host", "0.0.0.0", "--port", "8000"}},
		"triton: its model repository is a directory, even for an hf:// model": {engine: servingv1.EngineTriton, uri: "hf://acme/llm",
			want: []string{"--model-repository", "/models", "--http-port", "8000"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ai := sampleV1(t)
			ai.Spec.Engine = servingv1.EngineSpec{Name: tc.engine, Port: 8000}
			ai.Spec.Model.URI, ai.Spec.Model.Revision = tc.uri, ""
			d, err := Deployment(ai, DefaultEngines)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, d.Spec.Template.Spec.Containers[0].Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}
