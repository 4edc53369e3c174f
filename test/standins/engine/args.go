package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// launch is an engine's command line, parsed: what to load and where to
// listen.
type launch struct {
	Engine   string   // vllm, sglang or tgi
	Model    string   // as given: a directory, or a hub repo id
	Revision string   // the hub revision; "" is main
	Host     string   // "" listens on every address
	Port     int      // 0 picks a free port (logged)
	Names    []string // the served model names; none means Model
	HubCache string   // TGI's --huggingface-hub-cache: HUGGINGFACE_HUB_CACHE for the engine
}

// cliError is a command line the real program would refuse, with the
// message and exit status it would give.
type cliError struct {
	Code int
	Msg  string
}

func (e *cliError) Error() string { return e.Msg }

// usage is an argparse-style refusal of a command line: exit status 2.
func usage(prog, format string, a ...any) *cliError {
	return &cliError{Code: 2, Msg: prog + ": error: " + fmt.Sprintf(format, a...)}
}

// runLaunch runs an engine from its command line: vllm,
// text-generation-launcher, sglang or python -m.
func runLaunch(ctx context.Context, argv []string, p proc) int {
	l, err := parseLaunch(argv, p.env)
	if err != nil {
		fmt.Fprintln(p.stderr, err)
		if ce := (*cliError)(nil); errors.As(err, &ce) {
			return ce.Code
		}
		return 2
	}
	return runEngine(ctx, l, p)
}

// parseLaunch parses an engine's command line; argv[0] is the name it was
// called by. e gives the variables TGI reads its settings from.
func parseLaunch(argv []string, e env) (launch, error) {
	name, args := filepath.Base(argv[0]), argv[1:]
	switch {
	case name == "vllm":
		return parseVLLMCLI(args)
	case name == "text-generation-launcher":
		return parseTGI(args, e)
	case name == "sglang":
		if len(args) == 0 || args[0] != "serve" {
			return launch{}, usage("sglang", "the stand-in runs only `sglang serve`")
		}
		return parseSGLang(args[1:])
	case pythonRE.MatchString(name):
		module, rest, err := pythonModule(argv)
		if err != nil {
			return launch{}, err
		}
		switch module {
		case "vllm.entrypoints.openai.api_server":
			return parseVLLM(rest, false)
		case "vllm.entrypoints.cli.main":
			return parseVLLMCLI(rest)
		case "sglang.launch_server":
			return parseSGLang(rest)
		}
		return launch{}, &cliError{Code: 1, Msg: fmt.Sprintf("%s: No module named %s", argv[0], module)}
	}
	return launch{}, &cliError{Code: 127, Msg: fmt.Sprintf("engine: %s: not an engine", name)}
}

// pythonModule finds the module of `python [options] -m MODULE ARGS...`
// and its arguments, reading options as CPython does.
func pythonModule(argv []string) (string, []string, error) {
	prog := argv[0]
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return "", nil, &cliError{Code: 2, Msg: fmt.Sprintf("%s: can't open file '%s': [Errno 2] No such file or directory (the stand-in runs only python -m MODULE)", prog, a)}
		}
		for j := 1; j < len(a); j++ {
			switch c := a[j]; {
			case strings.IndexByte("mcXW", c) >= 0:
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(argv) {
						return "", nil, &cliError{Code: 2, Msg: fmt.Sprintf("Argument expected for the -%c option", c)}
					}
					i++
					val = argv[i]
				}
				switch c {
				case 'm':
					return val, argv[i+1:], nil
				case 'c':
					return "", nil, &cliError{Code: 2, Msg: fmt.Sprintf("%s: -c: the stand-in runs only python -m MODULE", prog)}
				}
				j = len(a)
			case strings.IndexByte("bBdEhiIOPqRsSuvV", c) >= 0:
			default:
				return "", nil, &cliError{Code: 2, Msg: fmt.Sprintf("Unknown option: -%c", c)}
			}
		}
	}
	return "", nil, &cliError{Code: 2, Msg: fmt.Sprintf("%s: the stand-in runs only python -m MODULE", prog)}
}

// vllmBools are vLLM flags commonly used that take no value.
var vllmBools = setOf("--trust-remote-code", "--enable-chunked-prefill", "--enforce-eager",
	"--disable-log-requests", "--enable-log-requests", "--enable-prefix-caching", "--disable-log-stats",
	"--enable-auto-tool-choice", "--enable-lora", "--disable-custom-all-reduce", "--enable-expert-parallel",
	"--disable-frontend-multiprocessing", "--enable-sleep-mode", "--skip-tokenizer-init",
	"--disable-sliding-window", "--headless", "--enable-prompt-tokens-details", "--async-scheduling",
	"--disable-fastapi-docs", "--enable-server-load-tracking", "--enable-force-include-usage",
	"--disable-uvicorn-access-log", "--enable-request-id-headers")

// parseVLLMCLI parses what follows `vllm`: only `serve` is run.
func parseVLLMCLI(args []string) (launch, error) {
	if len(args) == 0 || args[0] != "serve" {
		return launch{}, usage("vllm", "the stand-in runs only `vllm serve`")
	}
	return parseVLLM(args[1:], true)
}

// parseVLLM parses the arguments of `vllm serve` (serve: the model may be
// the one positional word) or of python -m vllm.entrypoints.openai.api_server.
func parseVLLM(args []string, serve bool) (launch, error) {
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
	model := s.last("--model")
	switch {
	case serve && len(s.pos) == 1:
		model = s.pos[0]
	case serve && len(s.pos) > 1:
		return launch{}, usage("vllm", "unrecognized arguments: %s", strings.Join(s.pos[1:], " "))
	case !serve && len(s.pos) > 0:
		return launch{}, usage("vllm", "unrecognized arguments: %s", strings.Join(s.pos, " "))
	}
	if model == "" {
		return launch{}, usage("vllm", "no model: give it as `vllm serve MODEL` or --model MODEL")
	}
	port, err := parsePort("vllm", "--port", s.last("--port"), 8000)
	if err != nil {
		return launch{}, err
	}
	return launch{Engine: "vllm", Model: model, Revision: s.last("--revision"), Host: s.last("--host"),
		Port: port, Names: s.flags["--served-model-name"]}, nil
}

// tgiBools are text-generation-launcher flags that take no value.
var tgiBools = setOf("--trust-remote-code", "--disable-custom-kernels", "--json-output",
	"--disable-grammar-support", "--enable-prefill-logprobs", "--disable-crash-reports")

// parseTGI parses text-generation-launcher's arguments. Like the real
// launcher (clap), a flag not given is read from its variable (MODEL_ID,
// REVISION, PORT); the default port is 3000. HOSTNAME is not read: every
// container has it set to its host name.
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
		return launch{}, &cliError{Code: 2, Msg: fmt.Sprintf("error: unexpected argument '%s' found", s.pos[0])}
	}
	fromEnv := func(flag, name string) (string, string) {
		if v, ok := s.flags[flag]; ok {
			return v[0], flag
		}
		v, _ := e.lookup(name)
		return v, name
	}
	model, _ := fromEnv("--model-id", "MODEL_ID")
	if model == "" {
		return launch{}, usage(prog, "no model: give --model-id or MODEL_ID")
	}
	revision, _ := fromEnv("--revision", "REVISION")
	portText, from := fromEnv("--port", "PORT")
	port, err := parsePort(prog, from, portText, 3000)
	if err != nil {
		return launch{}, err
	}
	host := s.last("--hostname")
	if host == "" {
		host = "0.0.0.0"
	}
	return launch{Engine: "tgi", Model: model, Revision: revision, Host: host, Port: port,
		HubCache: s.last("--huggingface-hub-cache")}, nil
}

// sglangBools are SGLang flags commonly used that take no value.
var sglangBools = setOf("--trust-remote-code", "--enable-torch-compile", "--disable-radix-cache",
	"--enable-metrics", "--skip-server-warmup", "--disable-cuda-graph", "--enable-mixed-chunk",
	"--enable-dp-attention", "--log-requests", "--enable-cache-report", "--disable-overlap-schedule",
	"--enable-p2p-check", "--is-embedding", "--skip-tokenizer-init")

// parseSGLang parses the arguments of python -m sglang.launch_server (or
// sglang serve). The default port is 30000; the host defaults to 0.0.0.0
// here, where SGLang's own default is 127.0.0.1.
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
		host = "0.0.0.0"
	}
	return launch{Engine: "sglang", Model: model, Revision: s.last("--revision"), Host: host, Port: port,
		Names: s.flags["--served-model-name"]}, nil
}

// parsePort reads a port given by from (a flag or variable); "" is def.
func parsePort(prog, from, v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 65535 {
		return 0, usage(prog, "argument %s: invalid port %q", from, v)
	}
	return n, nil
}
