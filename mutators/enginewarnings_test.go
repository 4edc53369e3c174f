package mutators

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

func TestEngineWarnings(t *testing.T) {
	const s3Model = "s3://models/llama"
	engineReads := modelSettings(s3Model, func(m *annotations.ModelSettings) { m.Delivery = annotations.DeliveryEngine })
	cases := map[string]struct {
		engine  annotations.EngineName
		model   *annotations.ModelSettings
		port    int32 // an explicit modelgate.io/port
		command []string
		env     []corev1.EnvVar
		want    []string
	}{
		"vllm serve with the model positional": {engine: annotations.EngineVLLM,
			command: []string{"vllm", "serve", "acme/llm", "--port", "8000"}},
		"vllm serve with --model": {engine: annotations.EngineVLLM,
			command: []string{"vllm", "serve", "--model", "acme/llm"},
			want: []string{`container "server" starts ` + "`vllm serve`" + ` with --model acme/llm, which vLLM deprecates with ` +
				"`vllm serve`" + ` and will remove: give the model as its first argument, ` + "`vllm serve acme/llm`"}},
		"vllm serve with --model= in a shell": {engine: annotations.EngineVLLM,
			command: []string{"sh", "-c", "exec vllm serve --model=acme/llm --port 8000"},
			want: []string{`container "server" starts ` + "`vllm serve`" + ` with --model acme/llm, which vLLM deprecates with ` +
				"`vllm serve`" + ` and will remove: give the model as its first argument, ` + "`vllm serve acme/llm`"}},
		"the API server module takes --model as it always did": {engine: annotations.EngineVLLM,
			command: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "acme/llm"}},
		"a dynamo worker with its status server": {engine: annotations.EngineDynamo,
			command: []string{"python3", "-m", "dynamo.vllm", "--model", "acme/llm"},
			env:     []corev1.EnvVar{{Name: "DYN_SYSTEM_PORT", Value: "9090"}}},
		"a dynamo worker with its status server off": {engine: annotations.EngineDynamo,
			command: []string{"python3", "-m", "dynamo.vllm", "--model", "acme/llm"},
			env:     []corev1.EnvVar{{Name: "DYN_SYSTEM_ENABLED", Value: "true"}},
			want: []string{`container "server" runs a Dynamo worker whose status server is off (DYN_SYSTEM_PORT is not set to a port): ` +
				`it serves nothing the kubelet can probe, so modelgate adds no probes; set DYN_SYSTEM_PORT (Dynamo's operator uses 9090), ` +
				`or modelgate.io/port to the port of a server it runs`}},
		"a dynamo worker whose port modelgate.io/port names": {engine: annotations.EngineDynamo, port: 9345,
			command: []string{"python3", "-m", "dynamo.sglang", "--model-path", "acme/llm"}},
		"a dynamo frontend": {engine: annotations.EngineDynamo, command: []string{"python3", "-m", "dynamo.frontend"}},
		"vllm streams an s3 model that modelgate would load too": {engine: annotations.EngineVLLM, model: modelSettings(s3Model),
			command: []string{"vllm", "serve", s3Model, "--load-format", "runai_streamer"},
			want: []string{`container "server" reads the model "s3://models/llama" from its source itself (--load-format runai_streamer), ` +
				`and modelgate's loader would read modelgate.io/model a second time into /models, which the engine does not use: ` +
				`set modelgate.io/model-mount: engine to leave the model to the engine, or point the engine at /models`}},
		"vllm streams an s3 model under its default load format": {engine: annotations.EngineVLLM, model: modelSettings(s3Model),
			command: []string{"vllm", "serve", "--port", "8000", s3Model},
			want: []string{`container "server" reads the model "s3://models/llama" from its source itself (its default --load-format, auto, ` +
				`streams an object-store model), and modelgate's loader would read modelgate.io/model a second time into /models, which the ` +
				`engine does not use: set modelgate.io/model-mount: engine to leave the model to the engine, or point the engine at /models`}},
		"sglang reads an s3 model with a format that does not stream": {engine: annotations.EngineSGLang, model: modelSettings(s3Model),
			command: []string{"sglang", "serve", s3Model, "--load-format", "safetensors", "--host", "0.0.0.0"},
			want: []string{`container "server" names the model "s3://models/llama" (sglang serve), which is not a path under ` +
				`modelgate.io/model-mount (/models), where modelgate loads modelgate.io/model: it would serve that model, not the one modelgate loads`}},
		"left to the engine, which reads it": {engine: annotations.EngineVLLM, model: engineReads,
			command: []string{"vllm", "serve", s3Model, "--load-format", "runai_streamer"}},
		"left to the engine, which reads another": {engine: annotations.EngineVLLM, model: engineReads,
			command: []string{"vllm", "serve", "/models"},
			want: []string{`container "server" names the model "/models" (vllm serve), but modelgate.io/model is "s3://models/llama" ` +
				`and modelgate.io/model-mount: engine leaves it to the engine, which mounts nothing: it would serve that model, not the annotated one`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			c := &tg.PodSpec.Containers[0]
			c.Command, c.Env = tc.command, tc.env
			s := annotations.Settings{Model: tc.model, Serving: serving(tc.engine)}
			s.Serving.Port = tc.port
			in := &Input{Settings: explicit(s), Options: testOptions()}
			if diff := cmp.Diff(tc.want, Warnings(tg, in)); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// workerProbed is probed for a Dynamo worker, whose status port is
// declared as "system".
func workerProbed(port int32) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		probed(0, "/health", port, 5, 60)(s)
		p := &s.Containers[0].Ports[len(s.Containers[0].Ports)-1]
		p.Name = "system"
	}
}

func TestDynamoProbes(t *testing.T) {
	cases := map[string]struct {
		command []string
		env     []corev1.EnvVar
		ports   []corev1.ContainerPort
		port    int32 // an explicit modelgate.io/port
		want    func(*corev1.PodSpec)
	}{
		"a frontend on its default port": {
			command: []string{"python3", "-m", "dynamo.frontend"},
			want:    probed(0, "/health", 8000, 5, 60),
		},
		"a frontend on --http-port": {
			command: []string{"python3", "-m", "dynamo.frontend", "--http-port=8787"},
			want:    probed(0, "/health", 8787, 5, 60),
		},
		"a frontend on DYN_HTTP_PORT": {
			command: []string{"python3", "-m", "dynamo.frontend"},
			env:     []corev1.EnvVar{{Name: "DYN_HTTP_PORT", Value: "8123"}},
			want:    probed(0, "/health", 8123, 5, 60),
		},
		"a worker on its status port, not its NIXL port": {
			command: []string{"python3", "-m", "dynamo.vllm", "--model", "acme/llm"},
			env:     []corev1.EnvVar{{Name: "DYN_SYSTEM_PORT", Value: "9090"}},
			ports:   []corev1.ContainerPort{{Name: "nixl", ContainerPort: 19090}},
			want:    workerProbed(9090),
		},
		"a worker with its status server off gets nothing": {
			command: []string{"python3", "-m", "dynamo.vllm", "--model", "acme/llm"},
			env:     []corev1.EnvVar{{Name: "DYN_SYSTEM_PORT", Value: "-1"}},
			ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
		},
		"a worker probed on the port modelgate.io/port names": {
			command: []string{"python3", "-m", "dynamo.trtllm"},
			port:    9345,
			want:    workerProbed(9345),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := func(s *corev1.PodSpec) {
				c := &s.Containers[0]
				c.Command, c.Env, c.Ports = tc.command, tc.env, tc.ports
			}
			tg, want := specTarget("Pod", before, tc.want)
			prior := tg.PodSpec.DeepCopy()
			s := annotations.Settings{Serving: serving(annotations.EngineDynamo)}
			s.Serving.Port = tc.port
			in := &Input{Operation: Create, Settings: explicit(s), Options: testOptions()}
			changed, err := ServingProbes{}.Mutate(tg, in)
			if err != nil {
				t.Fatal(err)
			}
			checkSpecChange(t, prior, want, tg.PodSpec, changed, tc.want != nil)
		})
	}
}

func TestModelReferencesAfterServeFlags(t *testing.T) {
	cases := map[string]struct {
		command []string
		want    []ModelReference
	}{
		"vllm serve, flags first": {command: []string{"vllm", "serve", "--port", "8000", "--trust-remote-code", "acme/llm"},
			want: []ModelReference{{Value: "acme/llm", Source: "vllm serve"}}},
		"vllm serve, attached values first": {command: []string{"vllm", "serve", "--port=8000", "acme/llm"},
			want: []ModelReference{{Value: "acme/llm", Source: "vllm serve"}}},
		"sglang serve": {command: []string{"sglang", "serve", "acme/llm", "--host", "0.0.0.0"},
			want: []ModelReference{{Value: "acme/llm", Source: "sglang serve"}}},
		"sglang serve --model-path": {command: []string{"sglang", "serve", "--model-path", "acme/llm"},
			want: []ModelReference{{Value: "acme/llm", Source: "--model-path"}}},
		"a flag of unknown arity followed by a flag": {command: []string{"vllm", "serve", "--enable-x", "--port", "1", "acme/llm"},
			want: []ModelReference{{Value: "acme/llm", Source: "vllm serve"}}},
		"nothing but flags":                 {command: []string{"vllm", "serve", "--port", "8000"}},
		"a shell variable before the model": {command: []string{"sh", "-c", "vllm serve $FLAGS acme/llm"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ModelReferences(tc.command, nil, nil)); diff != "" {
				t.Errorf("ModelReferences(%q) (-want +got):\n%s", tc.command, diff)
			}
		})
	}
}

// A published manifest gives its engine a Hub token from a Secret; the
// loader that downloads in the engine's place has none unless
// modelgate.io/model-credentials names one.
func TestEngineTokenWarning(t *testing.T) {
	const want = `container "server" gives its engine HF_TOKEN (key "token" of Secret "hf-token-secret"), but modelgate's ` +
		`loader downloads hf://meta-llama/Llama-3.1-8B-Instruct in its place with no credentials (the engine runs offline): ` +
		`a gated or private model would fail to load; set modelgate.io/model-credentials to the Secret that holds the token`
	fromSecret := []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "hf-token-secret"}, Key: "token"}}}}
	cases := map[string]struct {
		env         []corev1.EnvVar
		credentials string
		userLoader  bool
		model       string
		want        string
	}{
		"a token from a Secret, the loader without": {env: fromSecret, model: hfLlama, want: want},
		"the older variable, plain": {env: []corev1.EnvVar{{Name: "HUGGING_FACE_HUB_TOKEN", Value: "x"}}, model: hfLlama,
			want: `container "server" gives its engine HUGGING_FACE_HUB_TOKEN (its env), but modelgate's loader downloads ` +
				`hf://meta-llama/Llama-3.1-8B-Instruct in its place with no credentials (the engine runs offline): a gated or ` +
				`private model would fail to load; set modelgate.io/model-credentials to the Secret that holds the token`},
		"the loader has credentials": {env: fromSecret, credentials: "hf-token-secret", model: hfLlama},
		"no token":                   {model: hfLlama},
		"a loader of the user's own": {env: fromSecret, userLoader: true, model: hfLlama},
		"not a Hugging Face model":   {env: fromSecret, model: "s3://models/llama"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			tg.PodSpec.Containers[0].Env = tc.env
			if tc.userLoader {
				tg.PodSpec.InitContainers = []corev1.Container{{Name: LoaderContainerName, Image: "registry.example.com/fetch:1"}}
			}
			m := modelSettings(tc.model)
			m.Credentials = tc.credentials
			in := &Input{Settings: explicit(annotations.Settings{Model: m}), Options: testOptions()}
			if _, err := (Chain{ModelLoader{}}).Apply(tg, in); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			got := ""
			for _, w := range Warnings(tg, in) {
				if strings.Contains(w, "gives its engine") {
					got = w
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("warning (-want +got):\n%s", diff)
			}
		})
	}
}

// A Dynamo worker annotated with its backend's engine is probed as
// Dynamo's, on its status port, never on vLLM's 8000, where nothing
// listens and the startup probe would kill it; a warning says why.
func TestDynamoWorkerUnderItsBackendsEngine(t *testing.T) {
	tg, want := specTarget("Pod", func(s *corev1.PodSpec) {
		c := &s.Containers[0]
		c.Image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"
		c.Command = []string{"python3", "-m", "dynamo.vllm", "--model", "acme/llm"}
		c.Env = []corev1.EnvVar{{Name: "DYN_SYSTEM_PORT", Value: "9090"}}
	}, workerProbed(9090))
	in := &Input{Operation: Create, Settings: explicit(annotations.Settings{Serving: serving(annotations.EngineVLLM)}), Options: testOptions()}
	if _, err := (ServingProbes{}).Mutate(tg, in); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
		t.Errorf("pod spec (-want +got):\n%s", diff)
	}
	w := `container "server" starts NVIDIA Dynamo (python -m dynamo....), not vllm's own server: it is probed as Dynamo's; ` +
		`set modelgate.io/engine: dynamo`
	if got := Warnings(tg, in); !slices.Contains(got, w) {
		t.Errorf("warnings %q, want among them %q", got, w)
	}
}

// Triton given the directory modelgate's loader fills as its model
// repository would take the loader's state for a model.
func TestTritonRepositoryWarning(t *testing.T) {
	const want = `container "server" gives Triton /models as --model-repository, where modelgate's loader keeps its state ` +
		`(/models/.modelgate) beside the model: Triton loads every directory there as a model, fails on that one and exits; ` +
		`mount the model as an image volume (an oci:// model packed by ` + "`modelgate pack`" + `, modelgate.io/model-mount: ` +
		`image-volume) or use a pvc:// model, which carry no loader state`
	cases := map[string]struct {
		model string
		args  []string
		want  string
	}{
		"the loader's directory":           {model: s3Llama, args: []string{"--model-repository=/models/"}, want: want},
		"a directory below it":             {model: s3Llama, args: []string{"--model-repository", "/models/repository"}},
		"a claim mounted as it is":         {model: "pvc://models/triton", args: []string{"--model-repository", "/models"}},
		"an image volume, without a state": {model: "oci://ghcr.io/org/triton@" + ociDigest, args: []string{"--model-store=/models"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			c := &tg.PodSpec.Containers[0]
			c.Command, c.Args = []string{"tritonserver"}, tc.args
			m := modelSettings(tc.model)
			opts := testOptions()
			opts.Loader.ImageVolumes.All = true
			in := &Input{Settings: explicit(annotations.Settings{Model: m, Serving: serving(annotations.EngineTriton)}), Options: opts}
			if _, err := (Chain{ModelLoader{}}).Apply(tg, in); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			got := ""
			for _, w := range Warnings(tg, in) {
				if strings.Contains(w, "gives Triton") {
					got = w
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("warning (-want +got):\n%s", diff)
			}
		})
	}
}
