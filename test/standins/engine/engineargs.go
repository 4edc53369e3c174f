package main

import (
	"regexp"
	"slices"
	"strings"
)

// This file parses the command lines of vLLM, SGLang and Text Generation
// Inference as their releases in internal/enginefacts/engines.yaml do.

// vllmBools are vLLM flags commonly used that take no value.
var vllmBools = setOf("--trust-remote-code", "--enable-chunked-prefill", "--enforce-eager",
	"--disable-log-requests", "--enable-log-requests", "--enable-prefix-caching", "--disable-log-stats",
	"--enable-auto-tool-choice", "--enable-lora", "--disable-custom-all-reduce", "--enable-expert-parallel",
	"--disable-frontend-multiprocessing", "--enable-sleep-mode", "--skip-tokenizer-init",
	"--disable-sliding-window", "--headless", "--enable-prompt-tokens-details", "--async-scheduling",
	"--disable-fastapi-docs", "--enable-server-load-tracking", "--enable-force-include-usage",
	"--disable-uvicorn-access-log", "--enable-request-id-headers")

// vllmDefaultModel is the model vLLM serves when none is named
// (vllm/config/model.py: model: str = "Qwen/Qwen3-0.6B").
const vllmDefaultModel = "Qwen/Qwen3-0.6B"

// vllmModelWarning is what `vllm serve` logs when the model is given as
// --model (vllm/utils/argparse_utils.py, FlexibleArgumentParser).
const vllmModelWarning = "With `vllm serve`, you should provide the model as a positional argument or in a config file " +
	"instead of via the `--model` option. The `--model` option will be removed in a future version."

var (
	// vllmModelFlagRE and vllmServedNameRE are the patterns vLLM's
	// FlexibleArgumentParser looks for in `vllm serve`'s arguments.
	vllmModelFlagRE  = regexp.MustCompile(`^--model(=.+|$)`)
	vllmServedNameRE = regexp.MustCompile(`^--served[-_]model[-_]name(=.+|$)`)
	vllmConfigRE     = regexp.MustCompile(`^--config(=.+|$)`)
)

// parseVLLMCLI parses what follows `vllm`: only `serve` is run.
func parseVLLMCLI(args []string) (launch, error) {
	if len(args) == 0 || args[0] != "serve" {
		return launch{}, usage("vllm", "the stand-in runs only `vllm serve`")
	}
	return parseVLLM(args[1:], true)
}

// parseVLLM parses the arguments of `vllm serve` (serve) or of python -m
// vllm.entrypoints.openai.api_server. As in vLLM, `vllm serve` takes the
// model as its positional argument, among the flags anywhere (argparse
// intermixes them: an unknown flag's value is skipped unless vllmBools
// says it takes none), and moves a --model to that place with a warning;
// the api_server takes --model and ignores a positional word; no model is
// vllmDefaultModel.
func parseVLLM(args []string, serve bool) (launch, error) {
	var warnings []string
	if serve {
		if i := slices.IndexFunc(args, vllmModelFlagRE.MatchString); i >= 0 {
			warnings = append(warnings, vllmModelWarning)
			tag, rest := strings.TrimPrefix(args[i], "--model="), i+1
			if args[i] == "--model" {
				if i+1 >= len(args) {
					return launch{}, usage("vllm", "argument --model: expected one argument")
				}
				tag, rest = args[i+1], i+2
			}
			args = slices.Concat([]string{tag}, args[:i], args[rest:])
		}
		if len(args) > 0 && strings.HasPrefix(args[0], "-") && !slices.ContainsFunc(args, vllmConfigRE.MatchString) &&
			slices.ContainsFunc(args, vllmServedNameRE.MatchString) {
			return launch{}, &cliError{Code: 1, Msg: "ValueError: `model` should be provided as the first positional argument " +
				"when using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`."}
		}
	}
	spec := flagSpec{
		prog:   "vllm",
		valued: setOf("--model", "--port", "--host", "--revision"),
		multi:  setOf("--served-model-name"),
		isBool: func(n string) bool {
			return vllmBools[n] || strings.HasPrefix(n, "--no-") || (strings.HasPrefix(n, "-O") && len(n) > 2)
		},
		norm: func(n string) string { // vLLM's FlexibleArgumentParser reads --max_num_seqs as --max-num-seqs.
			if rest, ok := strings.CutPrefix(n, "--"); ok {
				return "--" + strings.ReplaceAll(rest, "_", "-")
			}
			return n
		},
	}
	s, err := spec.scan(args)
	if err != nil {
		return launch{}, err
	}
	if len(s.pos) > 1 {
		return launch{}, usage("vllm", "unrecognized arguments: %s", strings.Join(s.pos[1:], " "))
	}
	model := s.last("--model")
	if serve && len(s.pos) == 1 {
		model = s.pos[0]
	}
	if model == "" {
		model = vllmDefaultModel
	}
	port, err := parsePort("vllm", "--port", s.last("--port"), 8000)
	if err != nil {
		return launch{}, err
	}
	return launch{Engine: engineVLLM, Model: model, Revision: s.last("--revision"), Host: s.last("--host"),
		Port: port, Names: s.flags["--served-model-name"], Warnings: warnings}, nil
}

// tgiBools are text-generation-launcher flags that take no value.
var tgiBools = setOf("--trust-remote-code", "--disable-custom-kernels", "--json-output",
	"--disable-grammar-support", "--enable-prefill-logprobs", "--disable-crash-reports")

// parseTGI parses text-generation-launcher's arguments. Like the real
// launcher (clap), a flag not given is read from its variable (MODEL_ID,
// REVISION, PORT, HOSTNAME, HUGGINGFACE_HUB_CACHE); the default port is
// 3000 (the image sets PORT=80). The container runtime sets HOSTNAME to
// the Pod's name, so that TGI listens on the address that name resolves
// to (the Pod's, in the kubelet's /etc/hosts), not on loopback, unless
// --hostname says otherwise.
func parseTGI(args []string, e env) (launch, error) {
	const prog = "text-generation-launcher"
	spec := flagSpec{
		prog:   prog,
		valued: setOf("--model-id", "--revision", "--port", "--hostname", "--huggingface-hub-cache"),
		isBool: func(n string) bool { return tgiBools[n] },
		norm: func(n string) string {
			if n == "-p" {
				return "--port"
			}
			return n
		},
	}
	s, err := spec.scan(args)
	if err != nil {
		return launch{}, err
	}
	if len(s.pos) > 0 {
		return launch{}, &cliError{Code: 2, Msg: "error: unexpected argument '" + s.pos[0] + "' found"}
	}
	model, _ := flagOrEnv(s, "--model-id", e, "MODEL_ID", "")
	if model == "" {
		return launch{}, usage(prog, "no model: give --model-id or MODEL_ID")
	}
	revision, _ := flagOrEnv(s, "--revision", e, "REVISION", "")
	portText, from := flagOrEnv(s, "--port", e, "PORT", "")
	port, err := parsePort(prog, from, portText, 3000)
	if err != nil {
		return launch{}, err
	}
	host, _ := flagOrEnv(s, "--hostname", e, "HOSTNAME", "0.0.0.0")
	cache, _ := flagOrEnv(s, "--huggingface-hub-cache", e, "HUGGINGFACE_HUB_CACHE", "")
	return launch{Engine: engineTGI, Model: model, Revision: revision, Host: host, Port: port, HubCache: cache}, nil
}

// sglangBools are SGLang flags commonly used that take no value.
var sglangBools = setOf("--trust-remote-code", "--enable-torch-compile", "--disable-radix-cache",
	"--enable-metrics", "--skip-server-warmup", "--disable-cuda-graph", "--enable-mixed-chunk",
	"--enable-dp-attention", "--log-requests", "--enable-cache-report", "--disable-overlap-schedule",
	"--enable-p2p-check", "--is-embedding", "--skip-tokenizer-init")

// parseSGLangServe parses what follows `sglang serve`: as
// python/sglang/cli/serve.py does, --model-type is taken out and a first
// word that is not a flag is the model (--model-path), then the rest is
// python -m sglang.launch_server's.
func parseSGLangServe(args []string) (launch, error) {
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--model-type":
			if i+1 >= len(args) {
				return launch{}, &cliError{Code: 1, Msg: "ValueError: Error: --model-type requires a value."}
			}
			i++
		case strings.HasPrefix(a, "--model-type="):
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		rest = append([]string{"--model-path"}, rest...)
	}
	return parseSGLang(rest)
}

// parseSGLang parses the arguments of python -m sglang.launch_server. The
// default port is 30000 and the default host 127.0.0.1, as SGLang's:
// a manifest reached from outside its Pod passes --host 0.0.0.0.
func parseSGLang(args []string) (launch, error) {
	const prog = "sglang"
	spec := flagSpec{
		prog:   prog,
		valued: setOf("--model-path", "--port", "--host", "--revision", "--served-model-name"),
		isBool: func(n string) bool { return sglangBools[n] },
		norm: func(n string) string {
			if n == "--model" {
				return "--model-path"
			}
			return n
		},
	}
	s, err := spec.scan(args)
	if err != nil {
		return launch{}, err
	}
	if len(s.pos) > 0 {
		return launch{}, usage(prog, "unrecognized arguments: %s", strings.Join(s.pos, " "))
	}
	model := s.last("--model-path")
	if model == "" {
		return launch{}, usage(prog, "the following arguments are required: --model-path")
	}
	port, err := parsePort(prog, "--port", s.last("--port"), 30000)
	if err != nil {
		return launch{}, err
	}
	host := s.last("--host")
	if host == "" {
		host = "127.0.0.1"
	}
	return launch{Engine: engineSGLang, Model: model, Revision: s.last("--revision"), Host: host, Port: port,
		Names: s.flags["--served-model-name"]}, nil
}
