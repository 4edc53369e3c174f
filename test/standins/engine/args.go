package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// The engines the stand-in runs, by their names in modelgate's table of
// engine facts (internal/enginefacts/engines.yaml).
const (
	engineVLLM           = "vllm"
	engineSGLang         = "sglang"
	engineTGI            = "tgi"
	engineTriton         = "triton"
	engineDynamoFrontend = "dynamo-frontend"
	engineDynamoWorker   = "dynamo-worker"
	engineRoutingSidecar = "llm-d-routing-sidecar"
)

// launch is an engine's command line, parsed: what to load and where to
// listen.
type launch struct {
	Engine   string   // one of the engine* names
	Model    string   // as given: a directory, or a hub repo id
	Revision string   // the hub revision; "" is main
	Host     string   // "" listens on every address
	Port     int      // 0 picks a free port (logged); a Dynamo worker's status port, -1 when off
	Names    []string // the served model names; none means Model
	HubCache string   // TGI's --huggingface-hub-cache
	// Warnings are what the real program logs about its command line
	// (deprecations), printed to stderr before it starts.
	Warnings []string
	// Repositories are Triton's model repositories.
	Repositories []string
	// Discovery is Dynamo's discovery backend.
	Discovery string
	// EnginePort is the port of the engine a sidecar forwards to.
	EnginePort int
	// Secure is the sidecar's --secure-proxy: TLS with a self-signed
	// certificate, or CertPath's.
	Secure   bool
	CertPath string
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
// text-generation-launcher, sglang, tritonserver, pd-sidecar or python -m.
func runLaunch(ctx context.Context, argv []string, p proc) int {
	l, err := parseLaunch(argv, p.env)
	if err != nil {
		fmt.Fprintln(p.stderr, err)
		if ce := (*cliError)(nil); errors.As(err, &ce) {
			return ce.Code
		}
		return 2
	}
	for _, w := range l.Warnings {
		fmt.Fprintln(p.stderr, "WARNING "+w)
	}
	switch l.Engine {
	case engineTriton:
		return runTriton(ctx, l, p)
	case engineDynamoFrontend:
		return runFrontend(ctx, l, p)
	case engineDynamoWorker:
		return runWorker(ctx, l, p)
	case engineRoutingSidecar:
		return runSidecar(ctx, l, p)
	}
	return runEngine(ctx, l, p)
}

// parseLaunch parses an engine's command line; argv[0] is the name it was
// called by. e gives the variables the engines read settings from.
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
		return parseSGLangServe(args[1:])
	case name == "tritonserver":
		return parseTriton(args)
	case name == "pd-sidecar":
		return parseSidecar(args)
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
		case "dynamo.frontend":
			return parseFrontend(rest, e)
		case "dynamo.vllm", "dynamo.sglang":
			return parseWorker(module, rest, e)
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

// flagOrEnv is a flag's last value, else the variable's when it is set
// and not empty (argparse's default=os.environ.get(...) and clap's env),
// else def.
func flagOrEnv(s scanned, flag string, e env, variable, def string) (value, from string) {
	if v, ok := s.flags[flag]; ok && len(v) > 0 {
		return v[len(v)-1], flag
	}
	if v, ok := e.lookup(variable); ok && v != "" {
		return v, variable
	}
	return def, flag
}
