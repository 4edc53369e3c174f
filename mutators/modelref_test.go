package mutators

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func ref(value, source string) ModelReference { return ModelReference{Value: value, Source: source} }

func TestModelReferences(t *testing.T) {
	const llama = "meta-llama/Llama-3.1-8B-Instruct"
	cases := map[string]struct {
		command, args []string
		env           []corev1.EnvVar
		want          []ModelReference
	}{
		"nothing": {},
		"vllm serve, positional": {
			command: []string{"vllm", "serve", llama, "--tensor-parallel-size", "8"},
			want:    []ModelReference{ref(llama, "vllm serve")},
		},
		"vllm by path, model in args": {
			command: []string{"/usr/local/bin/vllm"}, args: []string{"serve", "/models", "--max-model-len=8192"},
			want: []ModelReference{ref("/models", "vllm serve")},
		},
		"vllm serve followed by a flag names nothing positional": {
			command: []string{"vllm", "serve", "--model", llama},
			want:    []ModelReference{ref(llama, "--model")},
		},
		"the vLLM image's entrypoint, --model=": {
			args: []string{"--model=/models", "--served-model-name=llama", "--model-impl=vllm", "--gpu-memory-utilization=0.9"},
			want: []ModelReference{ref("/models", "--model")},
		},
		"the OpenAI server module, --model X": {
			command: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, args: []string{"--model", llama},
			want: []ModelReference{ref(llama, "--model")},
		},
		"sglang --model-path": {
			command: []string{"python3", "-m", "sglang.launch_server"},
			args:    []string{"--model-path", "Qwen/Qwen2.5-7B-Instruct", "--host", "0.0.0.0", "--port", "30000"},
			want:    []ModelReference{ref("Qwen/Qwen2.5-7B-Instruct", "--model-path")},
		},
		"tgi --model-id": {
			command: []string{"text-generation-launcher"}, args: []string{"--model-id", "bigscience/bloom-560m", "--num-shard", "1"},
			want: []ModelReference{ref("bigscience/bloom-560m", "--model-id")},
		},
		"tgi MODEL_ID": {
			env:  []corev1.EnvVar{{Name: "PORT", Value: "80"}, {Name: "MODEL_ID", Value: "/models"}},
			want: []ModelReference{ref("/models", "env MODEL_ID")},
		},
		"MODEL_ID from a Secret names nothing": {
			env: []corev1.EnvVar{{Name: "MODEL_ID", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "m"}}}},
		},
		"sh -c script": {
			command: []string{"/bin/sh", "-c"},
			args:    []string{"pip install -q flash-attn && exec vllm serve '" + llama + "' --port 8000;"},
			want:    []ModelReference{ref(llama, "vllm serve")},
		},
		"sh -c, the whole line in one string": {
			command: []string{"sh", "-c", `python3 -m sglang.launch_server --model-path="/models/llama" --host 0.0.0.0`},
			want:    []ModelReference{ref("/models/llama", "--model-path")},
		},
		"a $(VAR) reference from env": {
			args: []string{"--model=$(MODEL_DIR)/llama"},
			env:  []corev1.EnvVar{{Name: "MODEL_DIR", Value: "/models"}},
			want: []ModelReference{ref("/models/llama", "--model")},
		},
		"an unresolved $(VAR) names nothing": {
			args: []string{"--model", "$(MODEL)", "--model-id=$(OTHER)"},
		},
		"a shell variable names nothing": {
			command: []string{"sh", "-c", "vllm serve $MODEL --port 8000 && text-generation-launcher --model-id ${MODEL}"},
		},
		"$$ is a literal $ for the shell: nothing": {
			args: []string{"--model=$$(HOME)/m"}, env: []corev1.EnvVar{{Name: "HOME", Value: "/root"}},
		},
		"a reference to a variable that refers to another: nothing": {
			args: []string{"--model=$(M)"}, env: []corev1.EnvVar{{Name: "M", Value: "$(BASE)/m"}, {Name: "BASE", Value: "/models"}},
		},
		"a flag without a value": {
			args: []string{"--port", "8000", "--model"},
		},
		"a shell operator after serve": {
			command: []string{"sh", "-c", "vllm serve && echo"},
		},
		"served names and other flags are not models": {
			args: []string{"--served-model-name", "llama", "--model-name", "x", "--tokenizer", "org/tok", "--model-loader-extra-config", "{}"},
		},
		"every source, each once, in order": {
			command: []string{"vllm", "serve", "org/a"},
			args:    []string{"--model", "org/b", "--model=org/b", "--model-path=/models", "--model-id", "org/c"},
			env:     []corev1.EnvVar{{Name: "MODEL_ID", Value: "org/c"}},
			want: []ModelReference{
				ref("org/a", "vllm serve"), ref("org/b", "--model"), ref("/models", "--model-path"),
				ref("org/c", "--model-id"), ref("org/c", "env MODEL_ID"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ModelReferences(tc.command, tc.args, tc.env)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ModelReferences (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzModelReferences checks ModelReferences' contract on arbitrary
// command lines: command and args are lists joined by NUL, modelID the
// value of MODEL_ID. Every reference is a plausible model name from a known
// source, none twice, and the answer is the same on every call.
func FuzzModelReferences(f *testing.F) {
	for _, seed := range [][3]string{
		{"vllm\x00serve\x00meta-llama/Llama-3.1-8B-Instruct\x00--tensor-parallel-size\x008", "", ""},
		{"python3\x00-m\x00sglang.launch_server", "--model-path\x00meta-llama/Llama-3.1-8B-Instruct\x00--host\x000.0.0.0\x00--port\x0030000", ""},
		{"text-generation-launcher", "--model-id\x00bigscience/bloom-560m\x00--num-shard\x001", ""},
		{"/bin/sh\x00-c", "pip install x && exec vllm serve '/models' --port 8000;", ""},
		{"", "--model=/models\x00--served-model-name=llama\x00--gpu-memory-utilization=0.9", "/models"},
		{"sh\x00-c", "vllm serve $MODEL && text-generation-launcher --model-id=$(MODEL_ID)", "org/m"},
		{"", "--model=$(MODEL_ID)\x00--model\x00", "$(MODEL_ID)"},
		{"vllm\x00serve", "", "\xff\x00 \t"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	sources := []string{"vllm serve", "--model", "--model-path", "--model-id", "env MODEL_ID"}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, "\x00")
	}
	f.Fuzz(func(t *testing.T, command, args, modelID string) {
		env := []corev1.EnvVar{{Name: "MODEL_ID", Value: modelID}}
		got := ModelReferences(split(command), split(args), env)
		for i, r := range got {
			if !namesModel(r.Value) || strings.Contains(r.Value, "$") {
				t.Fatalf("reference %+v is not a plausible model name", r)
			}
			if !slices.Contains(sources, r.Source) {
				t.Fatalf("reference %+v has an unknown source", r)
			}
			if slices.Contains(got[:i], r) {
				t.Fatalf("reference %+v given twice: %v", r, got)
			}
		}
		if again := ModelReferences(split(command), split(args), env); !cmp.Equal(got, again) {
			t.Fatalf("ModelReferences not deterministic: %v then %v", got, again)
		}
	})
}
