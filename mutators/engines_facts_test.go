package mutators

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/enginefacts"
)

// This file holds the recogniser and the probe presets to the engine table
// (internal/enginefacts/engines.yaml): every command line the table says
// starts an engine is recognised, with its port, GPUs and model; every
// command, flag and variable the recogniser reads is in the table; the
// presets are the table's ports and readiness paths.

func engineTable(t *testing.T) *enginefacts.Table {
	t.Helper()
	table, err := enginefacts.Load()
	if err != nil {
		t.Fatal(err)
	}
	return table
}

// tableCommandLine builds the container a manifest would write to start
// the engine with the table's command cmd: the model as cmd takes it, the
// serving port (or a worker's status port) set to port, every address, and
// 2-way tensor and pipeline parallelism where the engine has them. It
// returns the GPUs that asks for (0 when it has no parallelism flags).
func tableCommandLine(e enginefacts.Engine, cmd enginefacts.Command, model string, port int) (corev1.Container, int64) {
	c := corev1.Container{Name: "server", Command: cmd.Argv}
	switch cmd.Model {
	case "":
	case enginefacts.ModelPositional:
		c.Args = append(c.Args, model)
	default:
		c.Args = append(c.Args, cmd.Model, model)
	}
	if f := e.FlagNames(enginefacts.RolePort); len(f) > 0 {
		c.Args = append(c.Args, f[0], strconv.Itoa(port))
	}
	if v, ok := e.Variable(enginefacts.RoleStatusPort); ok {
		c.Env = append(c.Env, corev1.EnvVar{Name: v.Name, Value: strconv.Itoa(port)})
	}
	if f := e.FlagNames(enginefacts.RoleHost); len(f) > 0 {
		c.Args = append(c.Args, f[0]+"=0.0.0.0")
	}
	gpus := int64(0)
	for _, role := range []string{enginefacts.RoleTensorParallel, enginefacts.RolePipelineParallel} {
		if f := e.FlagNames(role); len(f) > 0 {
			c.Args = append(c.Args, f[0], "2")
			gpus = max(gpus, 1) * 2
		}
	}
	return c, gpus
}

func TestRecogniserReadsTheTablesCommandLines(t *testing.T) {
	const model, port = "acme/llm-7b", 18080
	for _, e := range engineTable(t).Engines {
		if e.Annotation == "" {
			continue
		}
		engine := annotations.EngineName(e.Annotation)
		if _, ok := engines[engine]; !ok {
			t.Errorf("%s: modelgate.io/engine: %s has no traits in engines", e.Name, engine)
			continue
		}
		for _, cmd := range e.Commands {
			t.Run(e.Name+"/"+strings.Join(cmd.Argv, " "), func(t *testing.T) {
				c, gpus := tableCommandLine(e, cmd, model, port)
				if got := matchesEngine(&c, engine); got != 2 {
					t.Errorf("matchesEngine(%q %q) = %d, want 2 (by command line)", c.Command, c.Args, got)
				}
				if got := enginePort(&c, engine); got != port {
					t.Errorf("enginePort(%q %q, env %v) = %d, want %d", c.Command, c.Args, c.Env, got, port)
				}
				if got := engineGPUs(&c, engine); got != gpus {
					t.Errorf("engineGPUs(%q %q) = %d, want %d", c.Command, c.Args, got, gpus)
				}
				if cmd.Model == "" {
					return
				}
				source := cmd.Model
				if source == enginefacts.ModelPositional {
					source = strings.Join(cmd.Argv, " ")
				}
				want := ModelReference{Value: model, Source: source}
				if got := ModelReferences(c.Command, c.Args, c.Env); !slices.Contains(got, want) {
					t.Errorf("ModelReferences(%q %q) = %v, want it to hold %v", c.Command, c.Args, got, want)
				}
			})
		}
		for _, img := range e.Images {
			c := corev1.Container{Name: "server", Image: img.Ref}
			if got := matchesEngine(&c, engine); got != 2 {
				t.Errorf("%s: matchesEngine(image %s) = %d, want 2 (by image)", e.Name, img.Ref, got)
			}
		}
	}
}

func TestImageEntrypointsAreRecognised(t *testing.T) {
	// A manifest that gives only args runs the image's entrypoint: its
	// port flag is read from the args alone.
	for _, e := range engineTable(t).Engines {
		if e.Annotation == "" {
			continue
		}
		flags := e.FlagNames(enginefacts.RolePort)
		if len(flags) == 0 {
			continue
		}
		for _, img := range e.Images {
			if len(img.Entrypoint) == 0 {
				continue
			}
			c := corev1.Container{Name: "server", Image: img.Ref, Args: []string{flags[0], "18081"}}
			if got := enginePort(&c, annotations.EngineName(e.Annotation)); got != 18081 {
				t.Errorf("%s: enginePort(image %s, args %q) = %d, want 18081", e.Name, img.Ref, c.Args, got)
			}
		}
	}
}

func TestSidecarsAreNotTheEngine(t *testing.T) {
	for _, e := range engineTable(t).Engines {
		if e.SidecarOf == "" {
			continue
		}
		for _, img := range e.Images {
			c := corev1.Container{Name: "routing-proxy", Image: img.Ref, Command: e.Commands[0].Argv,
				Args: []string{"--port=8000"}}
			if got := matchesEngine(&c, annotations.EngineName(e.SidecarOf)); got != 0 {
				t.Errorf("%s: matchesEngine(%s) = %d, want 0: the sidecar must never be taken for %s", e.Name, img.Ref, got, e.SidecarOf)
			}
		}
	}
}

func TestProbePresetsAreTheTables(t *testing.T) {
	presets := DefaultProbePresets()
	table := engineTable(t)
	for engine, preset := range presets {
		var e enginefacts.Engine
		for _, cand := range table.Annotated(string(engine)) {
			if len(cand.FlagNames(enginefacts.RolePort)) > 0 {
				e = cand // Dynamo: the frontend, which serves the HTTP API
				break
			}
		}
		if e.Name == "" {
			t.Errorf("preset %s: no engine of the table serves it", engine)
			continue
		}
		if got := strconv.Itoa(int(preset.Port)); got != e.DefaultPort() {
			t.Errorf("preset %s: port %s, but %s listens on %s by default", engine, got, e.Name, e.DefaultPort())
		}
		ready, _ := e.Endpoint(enginefacts.RoleReadiness)
		if preset.Path != ready.Path {
			t.Errorf("preset %s: path %s, but %s's readiness endpoint is %s (%s)", engine, preset.Path, e.Name, ready.Path, ready.Source)
		}
	}
	for _, e := range table.Engines {
		if e.Annotation != "" {
			if _, ok := presets[annotations.EngineName(e.Annotation)]; !ok {
				t.Errorf("%s: modelgate.io/engine: %s has no probe preset", e.Name, e.Annotation)
			}
		}
	}
}

func TestDynamoWorkerProbesItsStatusPort(t *testing.T) {
	w, ok := engineTable(t).Engine("dynamo-worker")
	if !ok {
		t.Fatal("no dynamo-worker in the table")
	}
	ready, _ := w.Endpoint(enginefacts.RoleReadiness)
	v, _ := w.Variable(enginefacts.RoleStatusPort)
	if ready.Port != enginefacts.RoleStatusPort || v.Name != dynamoSystemPortEnv {
		t.Errorf("the table probes the worker on %q (%s), modelgate on %s", ready.Port, v.Name, dynamoSystemPortEnv)
	}
	if _, err := strconv.Atoi(v.Default); err != nil || v.Default[0] != '-' {
		t.Errorf("the table's %s default is %q; modelgate takes an unset variable for a server that is off", v.Name, v.Default)
	}
}

// legacyCommands are commands the recogniser still knows for releases
// older than the table's, with why.
var legacyCommands = map[string]string{
	"vllm.entrypoints.api_server": "vLLM's demo API server, in manifests written for vLLM up to v0.6",
}

func TestRecogniserReadsOnlyWhatTheTableHolds(t *testing.T) {
	table := engineTable(t)
	known := func(annotation string, match func(enginefacts.Engine) bool) bool {
		return slices.ContainsFunc(table.Annotated(annotation), match)
	}
	hasFlag := func(name string) func(enginefacts.Engine) bool {
		return func(e enginefacts.Engine) bool { _, ok := e.Flag(name); return ok }
	}
	hasVariable := func(name string) func(enginefacts.Engine) bool {
		return func(e enginefacts.Engine) bool {
			return slices.ContainsFunc(e.Variables, func(v enginefacts.Variable) bool { return v.Name == name }) ||
				slices.ContainsFunc(e.Flags, func(f enginefacts.Flag) bool { return f.Env == name })
		}
	}
	hasCommand := func(cmd string) func(enginefacts.Engine) bool {
		return func(e enginefacts.Engine) bool {
			return slices.ContainsFunc(e.Commands, func(c enginefacts.Command) bool {
				return strings.HasSuffix(strings.Join(c.Argv, " "), cmd)
			})
		}
	}
	traits := map[string]engineTraits{}
	for name, e := range engines {
		traits[string(name)] = e
	}
	traits["dynamo/frontend"], traits["dynamo/worker"] = dynamoFrontend, dynamoWorker
	for name, e := range traits {
		annotation, _, _ := strings.Cut(name, "/")
		for _, cmd := range e.commands {
			if _, legacy := legacyCommands[cmd]; !legacy && !known(annotation, hasCommand(cmd)) {
				t.Errorf("%s: command %q is not in the table", name, cmd)
			}
		}
		flags := slices.Clone(e.portFlags)
		for _, group := range e.parallelFlags {
			flags = append(flags, group...)
		}
		for _, f := range flags {
			if !known(annotation, hasFlag(f)) {
				t.Errorf("%s: flag %s is not in the table", name, f)
			}
		}
		if e.portEnv != "" && !known(annotation, hasVariable(e.portEnv)) {
			t.Errorf("%s: variable %s is not in the table", name, e.portEnv)
		}
	}
	anyEngine := func(role string) []string {
		var out []string
		for _, e := range table.Engines {
			out = append(out, e.FlagNames(role)...)
		}
		return out
	}
	for _, f := range modelFlags {
		if !slices.Contains(anyEngine(enginefacts.RoleModel), f) {
			t.Errorf("model flag %s is no engine's model flag in the table", f)
		}
	}
	for _, f := range cacheFlags {
		if !slices.Contains(anyEngine(enginefacts.RoleDownloadDir), f) {
			t.Errorf("cache flag %s is no engine's download directory in the table", f)
		}
	}
}

func TestStreamingFormatsAreTheTables(t *testing.T) {
	for _, e := range engineTable(t).Engines {
		if e.Annotation == "" || strings.HasPrefix(e.Name, "dynamo") {
			continue
		}
		var want []string
		for _, f := range e.FlagsWith(enginefacts.RoleLoadFormat) {
			want = append(want, f.Streams...)
		}
		got := slices.DeleteFunc(slices.Clone(streamingLoadFormats[annotations.EngineName(e.Annotation)]),
			func(s string) bool { return s == "auto" }) // vLLM streams an object-store model under auto too
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: streaming load formats %v, the table's %v", e.Name, got, want)
		}
	}
}

func TestLoopbackDefaultsAreJudged(t *testing.T) {
	for _, e := range engineTable(t).Engines {
		if e.Annotation == "" {
			continue
		}
		for _, f := range e.FlagsWith(enginefacts.RoleHost) {
			if f.Default != "127.0.0.1" && f.Default != "localhost" {
				continue
			}
			for _, cmd := range e.Commands {
				c := corev1.Container{Name: "server", Command: cmd.Argv, Args: []string{"--port", "9000"}}
				if only, _ := loopbackOnly(&c, annotations.EngineName(e.Annotation)); !only {
					t.Errorf("%s: %q without %s listens on %s, which loopbackOnly does not see", e.Name, cmd.Argv, f.Names[0], f.Default)
				}
			}
		}
	}
}

func TestDeprecatedModelFlagsWarn(t *testing.T) {
	for _, e := range engineTable(t).Engines {
		for _, f := range e.FlagsWith(enginefacts.RoleModel) {
			if f.Deprecated == "" || e.Annotation != string(annotations.EngineVLLM) {
				continue
			}
			c := corev1.Container{Name: "vllm", Command: []string{"vllm", "serve"}, Args: []string{f.Names[0], "acme/llm"}}
			in := &Input{Settings: annotations.Settings{Serving: serving(annotations.EngineVLLM)}}
			if w := deprecatedModelFlagWarning(&c, in); !strings.Contains(w, "deprecates") {
				t.Errorf("%s: vllm serve %s gives no deprecation warning (%q)", e.Name, f.Names[0], w)
			}
		}
	}
}
