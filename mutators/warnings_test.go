package mutators

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

func TestWarnings(t *testing.T) {
	const (
		hfOther = `container "server" names the model "meta-llama/Llama-3.1-70B-Instruct" (vllm serve), which is neither ` +
			`the repository of modelgate.io/model ("meta-llama/Llama-3.1-8B-Instruct") nor a path under modelgate.io/model-mount (/models): ` +
			`it would serve that model, not the one modelgate loads`
		memoryLow = `container "server" has a memory limit of 16Gi, below modelgate.io/model-size (20Gi): with modelgate.io/model-cache: memory ` +
			`the model is a tmpfs whose pages count against the pod's memory once the loader exits; raise the limit to cover the model and the engine`
	)
	memory := modelSettings(hfLlama, sized("20Gi"), cachedIn(annotations.CacheMemory, ""))
	memoryLimit := func(q string) func(*corev1.Container) {
		return func(c *corev1.Container) {
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
		}
	}
	cases := map[string]struct {
		model     *annotations.ModelSettings
		container int // NoContainer for none; 0 unless set
		options   func(*LoaderOptions)
		server    func(*corev1.Container)
		want      []string
	}{
		"no model": {server: func(c *corev1.Container) { c.Args = []string{"--model", "org/x"} }},
		"no serving container": {
			model: modelSettings(hfLlama), container: NoContainer,
			server: func(c *corev1.Container) { c.Args = []string{"--model", "org/x"} },
		},
		"names nothing": {model: modelSettings(hfLlama)},
		"hf: the repository": {
			model:  modelSettings(hfLlama + "@main"),
			server: func(c *corev1.Container) { c.Command = []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"} },
		},
		"hf: the mount path": {
			model: modelSettings(hfLlama), server: func(c *corev1.Container) { c.Args = []string{"--model=/models"} },
		},
		"hf: a path under the mount, not clean": {
			model: modelSettings(hfLlama), server: func(c *corev1.Container) { c.Args = []string{"--model", "/models/./sub/../x/"} },
		},
		"hf: another repository": {
			model:  modelSettings(hfLlama),
			server: func(c *corev1.Container) { c.Command = []string{"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"} },
			want:   []string{hfOther},
		},
		"hf: the repository in another letter case is another repository": {
			model:  modelSettings(hfLlama),
			server: func(c *corev1.Container) { c.Args = []string{"--model", "meta-llama/llama-3.1-8b-instruct"} },
			want: []string{`container "server" names the model "meta-llama/llama-3.1-8b-instruct" (--model), which is neither ` +
				`the repository of modelgate.io/model ("meta-llama/Llama-3.1-8B-Instruct") nor a path under modelgate.io/model-mount (/models): ` +
				`it would serve that model, not the one modelgate loads`},
		},
		"a path that only starts like the mount": {
			model:  modelSettings(s3Llama),
			server: func(c *corev1.Container) { c.Args = []string{"--model-path=/models2/llama"} },
			want: []string{`container "server" names the model "/models2/llama" (--model-path), which is not a path under ` +
				`modelgate.io/model-mount (/models), where modelgate loads modelgate.io/model: it would serve that model, not the one modelgate loads`},
		},
		"s3: a Hub repository": {
			model: modelSettings(s3Llama),
			server: func(c *corev1.Container) {
				c.Env = []corev1.EnvVar{{Name: "MODEL_ID", Value: "meta-llama/Llama-3.1-8B-Instruct"}}
			},
			want: []string{`container "server" names the model "meta-llama/Llama-3.1-8B-Instruct" (env MODEL_ID), which is not a path under ` +
				`modelgate.io/model-mount (/models), where modelgate loads modelgate.io/model: it would serve that model, not the one modelgate loads`},
		},
		"pvc: under another mount path": {
			model:  modelSettings("pvc://models/llama", func(m *annotations.ModelSettings) { m.MountPath = "/mnt/m" }),
			server: func(c *corev1.Container) { c.Args = []string{"--model-id", "/mnt/m/llama"} },
		},
		"relative to the working directory": {
			model: modelSettings(s3Llama),
			server: func(c *corev1.Container) {
				c.WorkingDir = "/models"
				c.Command = []string{"vllm", "serve", "."}
			},
		},
		"relative with '.' and no working directory: the benefit of the doubt": {
			model: modelSettings(s3Llama), server: func(c *corev1.Container) { c.Command = []string{"vllm", "serve", "./weights"} },
		},
		"every mismatch, once each": {
			model: modelSettings(hfLlama),
			server: func(c *corev1.Container) {
				c.Command = []string{"sh", "-c", "vllm serve meta-llama/Llama-3.1-70B-Instruct --model meta-llama/Llama-3.1-70B-Instruct"}
			},
			want: []string{hfOther, `container "server" names the model "meta-llama/Llama-3.1-70B-Instruct" (--model), which is neither ` +
				`the repository of modelgate.io/model ("meta-llama/Llama-3.1-8B-Instruct") nor a path under modelgate.io/model-mount (/models): ` +
				`it would serve that model, not the one modelgate loads`},
		},
		"memory cache, limit below the size":    {model: memory, server: memoryLimit("16Gi"), want: []string{memoryLow}},
		"memory cache, limit equal to the size": {model: memory, server: memoryLimit("20Gi")},
		"memory cache, no limit":                {model: memory},
		"disk cache, limit below the size":      {model: modelSettings(hfLlama, sized("20Gi")), server: memoryLimit("16Gi")},
		"memory cache of an oci image volume: no tmpfs": {
			model:   modelSettings("oci://ghcr.io/org/model:v1", sized("20Gi"), cachedIn(annotations.CacheMemory, "")),
			options: func(o *LoaderOptions) { o.ImageVolumes.All = true }, server: memoryLimit("1Gi"),
		},
		"both": {
			model: memory,
			server: func(c *corev1.Container) {
				memoryLimit("16Gi")(c)
				c.Command = []string{"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"}
			},
			want: []string{hfOther, memoryLow},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg, _ := specTarget("Pod", func(s *corev1.PodSpec) {
				if tc.server != nil {
					tc.server(&s.Containers[0])
				}
			}, nil)
			opts := testOptions()
			if tc.options != nil {
				tc.options(&opts.Loader)
			}
			in := &Input{Settings: annotations.Settings{Model: tc.model}, Container: tc.container, Options: opts}
			if diff := cmp.Diff(tc.want, Warnings(tg, in)); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// The serving container's own HF_HUB_CACHE is never overridden; when it
// points elsewhere than the cache modelgate's loader fills, a warning
// says the engine would not find the model.
func TestHubCacheWarning(t *testing.T) {
	const want = `container "server" sets HF_HUB_CACHE=/data itself, but modelgate's loader lays the Hugging Face cache out at ` +
		`/models/.cache/huggingface/hub: an engine given the repository id would not find the model there; remove the variable ` +
		`or set it to /models/.cache/huggingface/hub`
	cases := map[string]struct {
		env        []corev1.EnvVar
		userLoader bool
		model      string
		want       bool
	}{
		"its own cache elsewhere":    {env: []corev1.EnvVar{{Name: "HF_HUB_CACHE", Value: "/data"}}, model: hfLlama, want: true},
		"through a $(VAR) reference": {env: []corev1.EnvVar{{Name: "ROOT", Value: "/data"}, {Name: "HF_HUB_CACHE", Value: "$(ROOT)"}}, model: hfLlama, want: true},
		"the same directory":         {env: []corev1.EnvVar{{Name: "HF_HUB_CACHE", Value: "/models/.cache/huggingface/hub/"}}, model: hfLlama},
		"none of its own":            {model: hfLlama},
		"a loader of the user's own": {env: []corev1.EnvVar{{Name: "HF_HUB_CACHE", Value: "/data"}}, userLoader: true, model: hfLlama},
		"not a Hugging Face repo":    {env: []corev1.EnvVar{{Name: "HF_HUB_CACHE", Value: "/data"}}, model: "s3://models/llama"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			tg.PodSpec.Containers[0].Env = tc.env
			if tc.userLoader {
				tg.PodSpec.InitContainers = []corev1.Container{{Name: LoaderContainerName, Image: "registry.example.com/fetch:1"}}
			}
			in := &Input{Settings: explicit(annotations.Settings{Model: modelSettings(tc.model)}), Options: testOptions()}
			if _, err := (Chain{ModelLoader{}}).Apply(tg, in); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := slices.Contains(Warnings(tg, in), want); got != tc.want {
				t.Errorf("warned: %v, want %v (warnings %q)", got, tc.want, Warnings(tg, in))
			}
		})
	}
}

func TestLoopbackWarning(t *testing.T) {
	cases := map[string]struct {
		engine  annotations.EngineName
		command []string
		want    string
	}{
		"sglang without --host": {engine: annotations.EngineSGLang,
			command: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/models"},
			want: `container "server" starts SGLang without --host, so it listens on the loopback address only and the ` +
				`kubelet's probes cannot reach it: add --host 0.0.0.0`},
		"sglang on 127.0.0.1 in a shell": {engine: annotations.EngineSGLang,
			command: []string{"bash", "-c", "python3 -m sglang.launch_server --model-path /models --host=127.0.0.1 --port 30000"},
			want: `container "server" starts SGLang with --host 127.0.0.1, so it listens on the loopback address only and the ` +
				`kubelet's probes cannot reach it: add --host 0.0.0.0`},
		"sglang on every address": {engine: annotations.EngineSGLang,
			command: []string{"python3", "-m", "sglang.launch_server", "--host", "0.0.0.0"}},
		"sglang started some other way":   {engine: annotations.EngineSGLang, command: []string{"/start.sh"}},
		"vllm listens everywhere already": {engine: annotations.EngineVLLM, command: []string{"vllm", "serve", "org/m"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			tg.PodSpec.Containers[0].Command = tc.command
			in := &Input{Settings: explicit(annotations.Settings{Serving: annotations.ServingSettings{Engine: tc.engine}}), Options: testOptions()}
			got := slices.ContainsFunc(Warnings(tg, in), func(w string) bool { return strings.Contains(w, "loopback") })
			if got != (tc.want != "") || (got && !slices.Contains(Warnings(tg, in), tc.want)) {
				t.Errorf("warnings %q, want %q", Warnings(tg, in), tc.want)
			}
		})
	}
}
