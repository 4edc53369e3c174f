package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLaunch(t *testing.T) {
	tests := map[string]struct {
		argv    string // split at spaces
		env     env
		want    launch
		wantErr error
	}{
		"vllm serve with the model as positional": {
			argv: "vllm serve org/model --port 8080 --host 127.0.0.1",
			want: launch{Engine: "vllm", Model: "org/model", Host: "127.0.0.1", Port: 8080},
		},
		"vllm serve defaults": {
			argv: "/usr/local/bin/vllm serve /models/tiny",
			want: launch{Engine: "vllm", Model: "/models/tiny", Port: 8000},
		},
		"vllm serve --model=: a warning": {
			argv: "vllm serve --model=org/model --port=9000 --revision=v1",
			want: launch{Engine: "vllm", Model: "org/model", Revision: "v1", Port: 9000, Warnings: []string{vllmModelWarning}},
		},
		"vllm serve --model: a warning": {
			argv: "vllm serve --port 1 --model org/model --enforce-eager",
			want: launch{Engine: "vllm", Model: "org/model", Port: 1, Warnings: []string{vllmModelWarning}},
		},
		"vllm serve --model and a positional model": {
			argv:    "vllm serve org/a --model org/b",
			wantErr: &cliError{Code: 2, Msg: "vllm: error: unrecognized arguments: org/a"},
		},
		"vllm serve --model without its value": {
			argv:    "vllm serve --model",
			wantErr: &cliError{Code: 2, Msg: "vllm: error: argument --model: expected one argument"},
		},
		"vllm the model after flags and their values": {
			argv: "vllm serve --port 8001 --max-model-len 4096 --trust-remote-code org/model --dtype half",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8001},
		},
		"vllm served model name with the model after a flag": {
			argv:    "vllm serve --port 8001 org/model --served-model-name tiny",
			wantErr: &cliError{Code: 1, Msg: "ValueError: `model` should be provided as the first positional argument when using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`."},
		},
		"vllm served model name with --model": {
			argv: "vllm serve --port 8001 --model org/model --served_model_name tiny",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8001, Names: []string{"tiny"}, Warnings: []string{vllmModelWarning}},
		},
		"vllm unknown flags, with and without values": {
			argv: "vllm serve org/model --tensor-parallel-size 2 --trust-remote-code --max_num_batched_tokens 1024 " +
				"--enable-chunked-prefill --gpu-memory-utilization=0.9 -tp 2 -O3 --no-enable-log-requests --seed -1 --port 8001",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8001},
		},
		"vllm flags before the model": {
			argv: "vllm serve --dtype half --enforce-eager --max-model-len 4096 org/model",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8000},
		},
		"vllm underscores in a flag it reads": {
			argv: "vllm serve org/model --served_model_name tiny",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8000, Names: []string{"tiny"}},
		},
		"vllm served model names": {
			argv: "vllm serve org/model --served-model-name tiny other --port 1",
			want: launch{Engine: "vllm", Model: "org/model", Port: 1, Names: []string{"tiny", "other"}},
		},
		"vllm two models": {
			argv:    "vllm serve org/a org/b",
			wantErr: &cliError{Code: 2, Msg: "vllm: error: unrecognized arguments: org/b"},
		},
		"vllm no model: vLLM's default": {
			argv: "vllm serve --port 8000",
			want: launch{Engine: "vllm", Model: "Qwen/Qwen3-0.6B", Port: 8000},
		},
		"vllm flag it reads without its value": {
			argv:    "vllm serve org/model --port",
			wantErr: &cliError{Code: 2, Msg: "vllm: error: argument --port: expected one argument"},
		},
		"vllm bad port": {
			argv:    "vllm serve org/model --port http",
			wantErr: &cliError{Code: 2, Msg: `vllm: error: argument --port: invalid port "http"`},
		},
		"vllm other subcommand": {
			argv:    "vllm chat",
			wantErr: &cliError{Code: 2, Msg: "vllm: error: the stand-in runs only `vllm serve`"},
		},
		"python -m vllm api_server": {
			argv: "python3 -m vllm.entrypoints.openai.api_server --model org/model --port 8080 --served-model-name tiny",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8080, Names: []string{"tiny"}},
		},
		"python options before -m": {
			argv: "/usr/bin/python -u -X utf8 -mvllm.entrypoints.openai.api_server --model org/model",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8000},
		},
		"python -m vllm cli": {
			argv: "python3.12 -m vllm.entrypoints.cli.main serve org/model",
			want: launch{Engine: "vllm", Model: "org/model", Port: 8000},
		},
		"vllm api_server ignores a positional model": {
			argv: "python3 -m vllm.entrypoints.openai.api_server org/model --model org/other",
			want: launch{Engine: "vllm", Model: "org/other", Port: 8000},
		},
		"python unknown module": {
			argv:    "python3 -m vllm.foo --model org/model",
			wantErr: &cliError{Code: 1, Msg: "python3: No module named vllm.foo"},
		},
		"python script": {
			argv:    "python3 serve.py",
			wantErr: &cliError{Code: 2, Msg: "python3: can't open file 'serve.py': [Errno 2] No such file or directory (the stand-in runs only python -m MODULE)"},
		},
		"text-generation-launcher flags": {
			argv: "text-generation-launcher --model-id org/model --port 8080 --revision r1 --num-shard 2 --trust-remote-code --hostname 127.0.0.1",
			want: launch{Engine: "tgi", Model: "org/model", Revision: "r1", Host: "127.0.0.1", Port: 8080},
		},
		"text-generation-launcher from MODEL_ID and PORT": {
			argv: "text-generation-launcher --max-input-tokens 1024",
			env:  env{"MODEL_ID": "org/model", "PORT": "80", "REVISION": "r2"},
			want: launch{Engine: "tgi", Model: "org/model", Revision: "r2", Host: "0.0.0.0", Port: 80},
		},
		"text-generation-launcher default port": {
			argv: "text-generation-launcher",
			env:  env{"MODEL_ID": "org/model"},
			want: launch{Engine: "tgi", Model: "org/model", Host: "0.0.0.0", Port: 3000},
		},
		"text-generation-launcher flags win over variables": {
			argv: "text-generation-launcher --model-id /data/model -p 9 --huggingface-hub-cache /data/hub",
			env:  env{"MODEL_ID": "org/model", "PORT": "80"},
			want: launch{Engine: "tgi", Model: "/data/model", Host: "0.0.0.0", Port: 9, HubCache: "/data/hub"},
		},
		"text-generation-launcher HOSTNAME": {
			argv: "text-generation-launcher --model-id org/model",
			env:  env{"HOSTNAME": "tgi-7d9f-abcde"},
			want: launch{Engine: "tgi", Model: "org/model", Host: "tgi-7d9f-abcde", Port: 3000},
		},
		"text-generation-launcher HUGGINGFACE_HUB_CACHE": {
			argv: "text-generation-launcher",
			env:  env{"MODEL_ID": "org/model", "PORT": "80", "HUGGINGFACE_HUB_CACHE": "/cache", "HF_HUB_CACHE": "/other"},
			want: launch{Engine: "tgi", Model: "org/model", Host: "0.0.0.0", Port: 80, HubCache: "/cache"},
		},
		"text-generation-launcher bad PORT": {
			argv:    "text-generation-launcher --model-id org/model",
			env:     env{"PORT": "http"},
			wantErr: &cliError{Code: 2, Msg: `text-generation-launcher: error: argument PORT: invalid port "http"`},
		},
		"text-generation-launcher positional": {
			argv:    "text-generation-launcher org/model",
			wantErr: &cliError{Code: 2, Msg: "error: unexpected argument 'org/model' found"},
		},
		"sglang launch_server": {
			argv: "python3 -m sglang.launch_server --model-path org/model --port 30001 --host 127.0.0.1 --tp 2 --trust-remote-code --mem-fraction-static 0.8",
			want: launch{Engine: "sglang", Model: "org/model", Host: "127.0.0.1", Port: 30001},
		},
		"sglang --model and defaults": {
			argv: "python -m sglang.launch_server --model org/model --served-model-name tiny --revision v1",
			want: launch{Engine: "sglang", Model: "org/model", Revision: "v1", Host: "127.0.0.1", Port: 30000, Names: []string{"tiny"}},
		},
		"sglang serve --model-path": {
			argv: "sglang serve --model-path /models/tiny",
			want: launch{Engine: "sglang", Model: "/models/tiny", Host: "127.0.0.1", Port: 30000},
		},
		"sglang serve MODEL": {
			argv: "sglang serve --model-type llm org/model --host 0.0.0.0 --tp 2",
			want: launch{Engine: "sglang", Model: "org/model", Host: "0.0.0.0", Port: 30000},
		},
		"sglang serve MODEL after a flag": {
			argv:    "sglang serve --port 1 org/model",
			wantErr: &cliError{Code: 2, Msg: "sglang: error: unrecognized arguments: org/model"},
		},
		"triton": {
			argv: "tritonserver --model-repository=/models --model-store /more --http-port 8080 --http-address 127.0.0.1 --strict-readiness true",
			want: launch{Engine: "triton", Repositories: []string{"/models", "/more"}, Host: "127.0.0.1", Port: 8080},
		},
		"triton defaults": {
			argv: "tritonserver --model-repository /models",
			want: launch{Engine: "triton", Repositories: []string{"/models"}, Host: "0.0.0.0", Port: 8000},
		},
		"triton without a repository": {
			argv:    "tritonserver --http-port 8000",
			wantErr: &cliError{Code: 2, Msg: "tritonserver: error: the stand-in needs --model-repository"},
		},
		"dynamo frontend defaults": {
			argv: "python3 -m dynamo.frontend --router-mode kv",
			want: launch{Engine: "dynamo-frontend", Host: "0.0.0.0", Port: 8000, Discovery: "etcd"},
		},
		"dynamo frontend from variables": {
			argv: "python3 -m dynamo.frontend",
			env:  env{"DYN_HTTP_PORT": "9000", "DYN_DISCOVERY_BACKEND": "file"},
			want: launch{Engine: "dynamo-frontend", Host: "0.0.0.0", Port: 9000, Discovery: "file"},
		},
		"dynamo frontend flags win": {
			argv: "python3 -m dynamo.frontend --http-port 1 --discovery-backend mem",
			env:  env{"DYN_HTTP_PORT": "9000", "DYN_DISCOVERY_BACKEND": "file"},
			want: launch{Engine: "dynamo-frontend", Host: "0.0.0.0", Port: 1, Discovery: "mem"},
		},
		"dynamo frontend unknown discovery": {
			argv:    "python3 -m dynamo.frontend --discovery-backend nats",
			wantErr: &cliError{Code: 2, Msg: "dynamo.frontend: error: argument --discovery-backend: invalid choice: 'nats' (choose from 'kubernetes', 'etcd', 'file', 'mem')"},
		},
		"dynamo vllm worker": {
			argv: "python3 -m dynamo.vllm --model org/model --discovery-backend file --enforce-eager",
			env:  env{"DYN_SYSTEM_PORT": "9090"},
			want: launch{Engine: "dynamo-worker", Model: "org/model", Port: 9090, Discovery: "file"},
		},
		"dynamo sglang worker without a status server": {
			argv: "python3 -m dynamo.sglang --model-path org/model --tp 1",
			env:  env{"DYN_DISCOVERY_BACKEND": "file", "DYN_SYSTEM_ENABLED": "true"},
			want: launch{Engine: "dynamo-worker", Model: "org/model", Port: -1, Discovery: "file", Warnings: []string{
				"DYN_SYSTEM_ENABLED is deprecated: Use system_port instead. Set DYN_SYSTEM_PORT to enable the system metrics server. " +
					"DYN_SYSTEM_ENABLED=true alone enables nothing: no status server (DYN_SYSTEM_PORT is not set)."}},
		},
		"dynamo worker negative port": {
			argv: "python3 -m dynamo.sglang --model org/model",
			env:  env{"DYN_SYSTEM_PORT": "-5"},
			want: launch{Engine: "dynamo-worker", Model: "org/model", Port: -1, Discovery: "etcd"},
		},
		"pd-sidecar as llm-d's guide runs it": {
			argv: "/app/pd-sidecar --port=8000 --vllm-port=8200 --kv-connector=nixlv2 --zap-log-level=1 --secure-proxy=false",
			want: launch{Engine: "llm-d-routing-sidecar", Port: 8000, EnginePort: 8200, Warnings: []string{sidecarVLLMPortWarning}},
		},
		"pd-sidecar defaults": {
			argv: "pd-sidecar --zap-devel --kv-connector nixlv2",
			want: launch{Engine: "llm-d-routing-sidecar", Port: 8000, EnginePort: 8200, Secure: true},
		},
		"pd-sidecar --model-server-port wins": {
			argv: "pd-sidecar --vllm-port 1 --model-server-port 2 --cert-path /certs",
			want: launch{Engine: "llm-d-routing-sidecar", Port: 8000, EnginePort: 2, Secure: true, CertPath: "/certs", Warnings: []string{sidecarVLLMPortWarning}},
		},
		"sglang without a model": {
			argv:    "python3 -m sglang.launch_server --port 30000",
			wantErr: &cliError{Code: 2, Msg: "sglang: error: the following arguments are required: --model-path"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseLaunch(strings.Fields(tc.argv), tc.env)
			if diff := cmp.Diff(tc.wantErr, err); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("launch (-want +got):\n%s", diff)
			}
		})
	}
}
