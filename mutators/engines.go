package mutators

import (
	"path"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// engineTraits are what tells a container running an engine, and what in
// its command line sets the engine's port and parallelism, as the engines'
// own CLIs and official images spell them.
type engineTraits struct {
	// names are substrings of a container name that suggest the engine.
	names []string
	// images are substrings of an image's repository (registry, tag and
	// digest stripped) that are the engine's published images.
	images []string
	// commands are words of a command line that start the engine: the
	// argument after "-m", the executable's base name, or "<cli> serve".
	commands []string
	// portFlags set the HTTP serving port on the engine's command line;
	// portEnv is the variable that sets it when no flag does.
	portFlags []string
	portEnv   string
	// parallelFlags multiply into the number of GPUs one replica of the
	// engine spreads the model over (tensor x pipeline parallel).
	parallelFlags [][]string
}

// engines are the traits of the engines modelgate knows. The custom engine
// has none: nothing identifies it. Every command, flag and variable here is
// in internal/enginefacts/engines.yaml with its source, and
// engines_facts_test.go holds them to it.
var engines = map[annotations.EngineName]engineTraits{
	// vLLM: vllm serve (its image's entrypoint since the v0.1x releases), or
	// python -m vllm.entrypoints.openai.api_server; images vllm/vllm-openai
	// (-cpu, -rocm) and vendor builds named vllm. --port (8000).
	annotations.EngineVLLM: {
		names:     []string{"vllm"},
		images:    []string{"vllm"},
		commands:  []string{"vllm serve", "vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"},
		portFlags: []string{"--port"},
		parallelFlags: [][]string{
			{"--tensor-parallel-size", "-tp"},
			{"--pipeline-parallel-size", "-pp"},
		},
	},
	// SGLang: sglang serve or python -m sglang.launch_server; image
	// lmsysorg/sglang. --port (30000), --tp-size/--tp, --pp-size.
	annotations.EngineSGLang: {
		names:     []string{"sglang"},
		images:    []string{"sglang"},
		commands:  []string{"sglang.launch_server", "sglang serve"},
		portFlags: []string{"--port"},
		parallelFlags: [][]string{
			{"--tp-size", "--tp", "--tensor-parallel-size"},
			{"--pp-size", "--pipeline-parallel-size"},
		},
	},
	// Text Generation Inference: text-generation-launcher, image
	// ghcr.io/huggingface/text-generation-inference; --port, else PORT
	// (the image sets PORT=80); --num-shard GPUs.
	annotations.EngineTGI: {
		names:         []string{"tgi", "text-generation"},
		images:        []string{"text-generation-inference", "tgi"},
		commands:      []string{"text-generation-launcher"},
		portFlags:     []string{"--port", "-p"},
		portEnv:       "PORT",
		parallelFlags: [][]string{{"--num-shard"}},
	},
	// Triton: tritonserver, image nvcr.io/nvidia/tritonserver;
	// --http-port (8000).
	annotations.EngineTriton: {
		names:     []string{"triton"},
		images:    []string{"tritonserver"},
		commands:  []string{"tritonserver"},
		portFlags: []string{"--http-port"},
	},
	// NVIDIA Dynamo, whose frontend and workers are different programs of
	// the same images (nvcr.io/nvidia/ai-dynamo/vllm-runtime, ...): what
	// tells the engine is either of them; what a container serves on is
	// its component's (see dynamoFrontend and dynamoWorker).
	annotations.EngineDynamo: {
		names:    []string{"dynamo"},
		images:   []string{"ai-dynamo"},
		commands: slices.Concat(dynamoFrontend.commands, dynamoWorker.commands),
	},
}

// dynamoFrontend is Dynamo's OpenAI-compatible frontend: python -m
// dynamo.frontend, serving on --http-port, else DYN_HTTP_PORT (8000).
var dynamoFrontend = engineTraits{
	commands:  []string{"dynamo.frontend"},
	portFlags: []string{"--http-port"},
	portEnv:   "DYN_HTTP_PORT",
}

// dynamoWorker is a Dynamo worker (python -m dynamo.vllm, dynamo.sglang,
// dynamo.trtllm): it serves no HTTP API, only a status server on
// DYN_SYSTEM_PORT when that is a port (off by default); it takes its
// backend's parallelism flags.
var dynamoWorker = engineTraits{
	commands: []string{"dynamo.vllm", "dynamo.sglang", "dynamo.trtllm"},
	portEnv:  dynamoSystemPortEnv,
	parallelFlags: [][]string{
		{"--tensor-parallel-size", "-tp", "--tp-size", "--tp"},
		{"--pipeline-parallel-size", "-pp", "--pp-size"},
	},
}

// dynamoSystemPortEnv turns a Dynamo worker's status server on, on that
// port (lib/runtime/src/config.rs: -1, off, by default).
const dynamoSystemPortEnv = "DYN_SYSTEM_PORT"

// component is the traits that say how the container serves: its engine's,
// or, for Dynamo, its frontend's or worker's as its command line starts
// one (the frontend's when it starts neither visibly).
func component(c *corev1.Container, engine annotations.EngineName) (engineTraits, bool) {
	e, ok := engines[engine]
	if !ok || engine != annotations.EngineDynamo {
		return e, ok
	}
	if engineStart(commandLine(c), dynamoWorker) >= 0 {
		return dynamoWorker, true
	}
	return dynamoFrontend, true
}

// servedEngine is the engine whose probes the container gets: Dynamo's
// when its command line visibly starts a Dynamo frontend or worker under
// modelgate.io/engine: vllm or sglang (the worker's backend: it serves no
// API on vLLM's or SGLang's port, and probes there would never pass),
// else the annotation's.
func servedEngine(c *corev1.Container, engine annotations.EngineName) annotations.EngineName {
	if engine != annotations.EngineVLLM && engine != annotations.EngineSGLang || !mentions(c, "dynamo.") {
		return engine // the command line cannot start Dynamo: not split
	}
	if engineStart(commandLine(c), engines[annotations.EngineDynamo]) >= 0 {
		return annotations.EngineDynamo
	}
	return engine
}

// mentions reports whether the container's command, args or plain env
// values hold s: a cheap test before splitting its command line.
func mentions(c *corev1.Container, s string) bool {
	has := func(v string) bool { return strings.Contains(v, s) }
	return slices.ContainsFunc(c.Command, has) || slices.ContainsFunc(c.Args, has) ||
		slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return has(v.Value) })
}

// isDynamoWorker reports whether the container starts a Dynamo worker.
func isDynamoWorker(c *corev1.Container, engine annotations.EngineName) bool {
	return engine == annotations.EngineDynamo && engineStart(commandLine(c), dynamoWorker) >= 0
}

// commandLine is a container's command and args as words (see
// ModelReferences for how they are split and expanded).
func commandLine(c *corev1.Container) []word {
	return splitWords(c.Command, c.Args, plainEnv(c.Env))
}

// plainEnv is a container's env, read for the variables with a plain
// value (a variable from valueFrom is not known at admission).
type plainEnv []corev1.EnvVar

// get returns the plain value of the last definition of the variable with
// a plain value, as the kubelet would see it.
func (e plainEnv) get(name string) (string, bool) {
	for i := len(e) - 1; i >= 0; i-- {
		if e[i].Name == name && e[i].ValueFrom == nil {
			return e[i].Value, true
		}
	}
	return "", false
}

// engineStart is the index of the word after the last invocation of the
// engine in words ("vllm serve", "-m sglang.launch_server", a path to
// tritonserver), or -1 when the command line does not start it.
func engineStart(words []word, e engineTraits) int {
	start := -1
	for i, w := range words {
		if !w.known || strings.HasPrefix(w.s, "-") {
			continue // a flag's value (--model-repository=/x/tritonserver) starts nothing
		}
		for _, cmd := range e.commands {
			first, second, two := strings.Cut(cmd, " ")
			if path.Base(w.s) != first {
				continue
			}
			switch {
			case !two:
				start = i + 1
			case i+1 < len(words) && words[i+1].s == second:
				start = i + 2
			}
		}
	}
	return start
}

// isShell reports whether a command runs a shell (sh -c "...").
func isShell(command []string) bool {
	if len(command) == 0 {
		return false
	}
	switch path.Base(command[0]) {
	case "sh", "bash", "dash", "ash", "zsh":
		return true
	}
	return false
}

// isSeparator reports whether a word ends a command in a shell line.
func isSeparator(s string) bool {
	switch s {
	case "&&", "||", ";", "|", "&":
		return true
	}
	return false
}

// engineArgs are the words of the container's command line that go to the
// engine: those after the engine's invocation up to the end of that shell
// command; or, when the command line does not name the engine and runs no
// shell, every word (the image's entrypoint is the engine). nil when the
// engine's arguments cannot be told apart (a shell script that starts it
// some other way).
func engineArgs(c *corev1.Container, e engineTraits) []word {
	words := commandLine(c)
	start := engineStart(words, e)
	if start < 0 {
		if isShell(c.Command) {
			return nil
		}
		return words
	}
	return commandArgs(words[start:])
}

// commandArgs are the words up to the end of the shell command they start.
func commandArgs(words []word) []word {
	for i, w := range words {
		switch {
		case isSeparator(w.s):
			return words[:i]
		case w.ends:
			return words[:i+1]
		}
	}
	return words
}

// flagValue is the value of the last of the flags in words (--flag v or
// --flag=v), and whether one was given with a known value.
func flagValue(words []word, flags []string) (string, bool) {
	value, found := "", false
	for i, w := range words {
		if !w.known {
			continue
		}
		for _, f := range flags {
			switch {
			case w.s == f && i+1 < len(words):
				value, found = words[i+1].s, words[i+1].known
			case strings.HasPrefix(w.s, f+"="):
				value, found = unquote(strings.TrimPrefix(w.s, f+"=")), true
			}
		}
	}
	return value, found
}

// parsePort reads a TCP port number.
func parsePort(s string) (int32, bool) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return int32(n), true
}

// enginePort is the port the container's own command line or environment
// gives the engine (--port, --http-port, PORT); 0 when they give none.
func enginePort(c *corev1.Container, engine annotations.EngineName) int32 {
	e, ok := component(c, engine)
	if !ok {
		return 0
	}
	if args := engineArgs(c, e); args != nil {
		if v, ok := flagValue(args, e.portFlags); ok {
			if p, ok := parsePort(v); ok {
				return p
			}
		}
	}
	if e.portEnv != "" {
		vars := plainEnv(c.Env)
		if v, ok := vars.get(e.portEnv); ok {
			if s, ok := expand(v, vars); ok {
				if p, ok := parsePort(s); ok {
					return p
				}
			}
		}
	}
	return 0
}

// declaredServingPort is the serving port among the TCP ports the
// container declares itself (ours excluded): the preset's when declared,
// else the one named "http", else the only one that is not for metrics or
// gRPC; 0 when that does not single one out.
func declaredServingPort(c *corev1.Container, preset int32, ours func(corev1.ContainerPort) bool) int32 {
	var candidates []corev1.ContainerPort
	for _, p := range c.Ports {
		if !isTCP(p) || ours(p) {
			continue
		}
		if p.ContainerPort == preset {
			return preset
		}
		name := strings.ToLower(p.Name)
		if name == "http" {
			return p.ContainerPort
		}
		if !strings.Contains(name, "metric") && !strings.Contains(name, "grpc") {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 1 {
		return candidates[0].ContainerPort
	}
	return 0
}

// engineGPUs is the number of GPUs the container's command line spreads
// the model over (tensor x pipeline parallel), 0 when it says nothing.
func engineGPUs(c *corev1.Container, engine annotations.EngineName) int64 {
	e, ok := component(c, engine)
	if !ok || len(e.parallelFlags) == 0 {
		return 0
	}
	args := engineArgs(c, e)
	n, found := int64(1), false
	for _, flags := range e.parallelFlags {
		v, ok := flagValue(args, flags)
		if !ok {
			continue
		}
		k, err := strconv.ParseInt(v, 10, 32)
		if err != nil || k < 1 || k > annotations.MaxGPUs {
			continue
		}
		n, found = n*k, true
	}
	if !found {
		return 0
	}
	return n
}

// matchesEngine reports how strongly a container looks like the engine's:
// 2 when its image or command line is the engine's, 1 when only its name
// suggests it, 0 when nothing does.
func matchesEngine(c *corev1.Container, engine annotations.EngineName) int {
	e, ok := engines[engine]
	if !ok {
		return 0
	}
	repo := strings.ToLower(imageRepository(c.Image))
	for _, s := range e.images {
		if strings.Contains(repo, s) {
			return 2
		}
	}
	if engineStart(commandLine(c), e) >= 0 {
		return 2
	}
	name := strings.ToLower(c.Name)
	for _, s := range e.names {
		if strings.Contains(name, s) {
			return 1
		}
	}
	return 0
}

// imageRepository is an image reference without its registry, tag and
// digest: vllm/vllm-openai for docker.io/vllm/vllm-openai:v0.6.0.
func imageRepository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	if first, rest, ok := strings.Cut(image, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return rest
	}
	return image
}

// loopbackOnly reports whether the container starts SGLang, whose server
// listens on 127.0.0.1 unless --host says otherwise, without a --host the
// kubelet's probes can reach (the address it was given, "" for none).
// Only a command line that visibly starts SGLang is judged.
func loopbackOnly(c *corev1.Container, engine annotations.EngineName) (bool, string) {
	if engine != annotations.EngineSGLang {
		return false, ""
	}
	e := engines[engine]
	words := commandLine(c)
	start := engineStart(words, e)
	if start < 0 {
		return false, ""
	}
	host, ok := flagValue(commandArgs(words[start:]), []string{"--host"})
	if !ok {
		return true, ""
	}
	return host == "127.0.0.1" || host == "localhost" || host == "::1", host
}
