package main

import (
	"encoding/json"
	"net"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/internal/enginefacts"
)

// These tests hold the stand-in to modelgate's table of engine facts
// (internal/enginefacts/engines.yaml): every command line the table
// describes is read as the table says (the model, the port and host flags
// with their aliases, defaults and variables, deprecations), every endpoint
// answers as the table says, and every program the images start is one
// the stand-in runs, linked in its image. A flag or default changed in the
// table that the stand-in does not follow fails here.

// notRun are the table's commands the stand-in does not run, and why.
var notRun = map[string]string{
	"python3 -m dynamo.trtllm": "TensorRT-LLM's worker: the table reads no model flag of it",
}

// table loads engines.yaml.
func table(t *testing.T) *enginefacts.Table {
	t.Helper()
	tb, err := enginefacts.Load()
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// runnable are the engine's commands the stand-in runs.
func runnable(e enginefacts.Engine) []enginefacts.Command {
	var out []enginefacts.Command
	for _, c := range e.Commands {
		if _, skip := notRun[strings.Join(c.Argv, " ")]; !skip {
			out = append(out, c)
		}
	}
	return out
}

var quotedRE = regexp.MustCompile(`"([^"]+)"`)

// quoted is the first double-quoted text of s: what a deprecation says.
func quoted(t *testing.T, s string) string {
	t.Helper()
	m := quotedRE.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no quoted message in %q", s)
	}
	return m[1]
}

var withCommandRE = regexp.MustCompile("^with `([^`]+)`")

// deprecation is what command c warns of when given flag f: its
// deprecation's message, unless the deprecation is of another command
// ("with `vllm serve`: ...").
func deprecation(t *testing.T, f enginefacts.Flag, c enginefacts.Command) string {
	t.Helper()
	if f.Deprecated == "" {
		return ""
	}
	if m := withCommandRE.FindStringSubmatch(f.Deprecated); m != nil && strings.Join(c.Argv, " ") != m[1] {
		return ""
	}
	return quoted(t, f.Deprecated)
}

// freeTCPPort is a port no one listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// reading is what the tests check of a parsed command line.
type reading struct {
	Engine, Model, Host, Discovery string
	Port, EnginePort               int
}

func readingOf(l launch) reading {
	model := l.Model
	if l.Engine == engineTriton {
		model = strings.Join(l.Repositories, ",")
	}
	return reading{Engine: l.Engine, Model: model, Host: l.Host, Discovery: l.Discovery, Port: l.Port, EnginePort: l.EnginePort}
}

// tableCase is a command line built from the table and what the
// stand-in must read from it.
type tableCase struct {
	argv    []string
	env     env
	want    reading
	warning string // a text one warning must hold; none when ""
}

// modelValue is the model a test command line names.
func modelValue(e enginefacts.Engine) string {
	if e.Name == engineTriton {
		return "/models"
	}
	return "org/tiny"
}

// defaults is what the engine reads from a command line that sets only
// its model, in its image's environment.
func defaults(t *testing.T, e enginefacts.Engine, model string) reading {
	t.Helper()
	r := reading{Engine: e.Name, Model: model}
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("engine %s: default %q is not a number", e.Name, s)
		}
		return n
	}
	if p := e.DefaultPort(); p != "" {
		r.Port = atoi(p)
	} else if v, ok := e.Variable(enginefacts.RoleStatusPort); ok {
		r.Port = atoi(v.Default)
	}
	if f := e.FlagsWith(enginefacts.RoleHost); len(f) > 0 {
		r.Host = f[0].Default
	}
	if f := e.FlagsWith(enginefacts.RoleDiscovery); len(f) > 0 {
		r.Discovery = f[0].Default
	}
	if f := e.FlagsWith(enginefacts.RoleEnginePort); len(f) > 0 {
		r.EnginePort = atoi(f[0].Default)
	}
	return r
}

// imageEnv is the environment the engine's image sets.
func imageEnv(e enginefacts.Engine) env {
	out := env{}
	for k, v := range e.Images[0].Env {
		out[k] = v
	}
	return out
}

// modelWays are the ways command c takes its model: positional, then
// each name of its model flag (for a positional command, of every model
// flag of the engine); none for a command that names no model.
func modelWays(e enginefacts.Engine, c enginefacts.Command) []string {
	switch c.Model {
	case "":
		return nil
	case enginefacts.ModelPositional:
		return append([]string{enginefacts.ModelPositional}, e.FlagNames(enginefacts.RoleModel)...)
	}
	f, _ := e.Flag(c.Model)
	return f.Names
}

// withModel is argv with the model given one way.
func withModel(argv []string, way, model string) []string {
	argv = slices.Clone(argv)
	switch way {
	case "":
		return argv
	case enginefacts.ModelPositional:
		return append(argv, model)
	}
	return append(argv, way, model)
}

// tableCases builds the cases of one command from the table.
func tableCases(t *testing.T, e enginefacts.Engine, c enginefacts.Command) map[string]tableCase {
	t.Helper()
	model := modelValue(e)
	ways := modelWays(e, c)
	base, firstWay := c.Argv, ""
	if len(ways) > 0 {
		firstWay = ways[0]
		base = withModel(c.Argv, firstWay, model)
	}
	def := defaults(t, e, model)
	if len(ways) == 0 {
		def.Model = ""
	}
	cases := map[string]tableCase{"defaults": {argv: base, env: imageEnv(e), want: def}}
	with := func(change func(*reading)) reading {
		r := def
		change(&r)
		return r
	}
	for _, way := range ways {
		f, _ := e.Flag(way)
		tc := tableCase{argv: withModel(c.Argv, way, "org/other"), env: imageEnv(e), want: with(func(r *reading) { r.Model = "org/other" })}
		tc.warning = deprecation(t, f, c)
		cases["model "+way] = tc
		if f.Env != "" {
			cases["model from "+f.Env] = tableCase{argv: c.Argv, env: imageEnv(e).with(f.Env, "org/env"),
				want: with(func(r *reading) { r.Model = "org/env" })}
		}
	}
	full := tableCase{argv: base, env: imageEnv(e), want: def}
	port := freeTCPPort(t)
	for _, f := range e.FlagsWith(enginefacts.RolePort) {
		for _, n := range f.Names {
			cases["port "+n] = tableCase{argv: append(slices.Clone(base), n, strconv.Itoa(port)), env: imageEnv(e),
				want: with(func(r *reading) { r.Port = port })}
		}
		if f.Env != "" {
			cases["port from "+f.Env] = tableCase{argv: base, env: imageEnv(e).with(f.Env, strconv.Itoa(port)),
				want: with(func(r *reading) { r.Port = port })}
			cases["port flag over "+f.Env] = tableCase{argv: append(slices.Clone(base), f.Names[0], strconv.Itoa(port)),
				env: imageEnv(e).with(f.Env, "1"), want: with(func(r *reading) { r.Port = port })}
		}
		full.argv = append(slices.Clone(full.argv), f.Names[0], strconv.Itoa(port))
		full.want.Port = port
	}
	if v, ok := e.Variable(enginefacts.RoleStatusPort); ok {
		cases["status port from "+v.Name] = tableCase{argv: base, env: imageEnv(e).with(v.Name, strconv.Itoa(port)),
			want: with(func(r *reading) { r.Port = port })}
		full.env = full.env.with(v.Name, strconv.Itoa(port))
		full.want.Port = port
	}
	if v, ok := e.Variable(enginefacts.RoleStatusEnabled); ok && v.Deprecated != "" {
		cases["deprecated "+v.Name] = tableCase{argv: base, env: imageEnv(e).with(v.Name, "true"), want: def, warning: quoted(t, v.Deprecated)}
	}
	for _, f := range e.FlagsWith(enginefacts.RoleHost) {
		for _, n := range f.Names {
			cases["host "+n] = tableCase{argv: append(slices.Clone(base), n, "10.1.2.3"), env: imageEnv(e),
				want: with(func(r *reading) { r.Host = "10.1.2.3" })}
		}
		if f.Env != "" {
			cases["host from "+f.Env] = tableCase{argv: base, env: imageEnv(e).with(f.Env, "10.1.2.4"),
				want: with(func(r *reading) { r.Host = "10.1.2.4" })}
		}
		full.argv = append(full.argv, f.Names[0], "0.0.0.0")
		full.want.Host = "0.0.0.0"
	}
	cases["model, port and host"] = full
	for _, f := range e.FlagsWith(enginefacts.RoleDiscovery) {
		for _, v := range f.Values {
			cases["discovery "+v] = tableCase{argv: append(slices.Clone(base), f.Names[0], v), env: imageEnv(e),
				want: with(func(r *reading) { r.Discovery = v })}
		}
		if f.Env != "" {
			cases["discovery from "+f.Env] = tableCase{argv: base, env: imageEnv(e).with(f.Env, "file"),
				want: with(func(r *reading) { r.Discovery = "file" })}
		}
	}
	for _, f := range e.FlagsWith(enginefacts.RoleEnginePort) {
		for _, n := range f.Names {
			tc := tableCase{argv: append(slices.Clone(base), n, strconv.Itoa(port)), env: imageEnv(e),
				want: with(func(r *reading) { r.EnginePort = port })}
			tc.warning = deprecation(t, f, c)
			cases["engine port "+n] = tc
		}
	}
	return cases
}

func TestTableCommandLines(t *testing.T) {
	for _, e := range table(t).Engines {
		for _, c := range runnable(e) {
			for name, tc := range tableCases(t, e, c) {
				t.Run(e.Name+"/"+strings.Join(c.Argv, " ")+"/"+name, func(t *testing.T) {
					l, err := parseLaunch(tc.argv, tc.env)
					if err != nil {
						t.Fatalf("%q: %v", tc.argv, err)
					}
					if diff := cmp.Diff(tc.want, readingOf(l)); diff != "" {
						t.Errorf("%q with %v (-want +got):\n%s", tc.argv, tc.env, diff)
					}
					if tc.warning == "" && len(l.Warnings) > 0 {
						t.Errorf("%q: warnings %q, want none", tc.argv, l.Warnings)
					}
					if tc.warning != "" && !slices.ContainsFunc(l.Warnings, func(w string) bool { return strings.Contains(w, tc.warning) }) {
						t.Errorf("%q: warnings %q, want one saying %q", tc.argv, l.Warnings, tc.warning)
					}
				})
			}
		}
	}
}

// engineLinks are the programs `make node-images` links in the engine's
// image (the Makefile's --program links).
func engineLinks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		if !strings.Contains(line, "--package=./test/standins/engine") {
			continue
		}
		m := regexp.MustCompile(`"links": (\[[^\]]*\])`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("the Makefile's engine image has no links: %s", line)
		}
		var links []string
		if err := json.Unmarshal([]byte(m[1]), &links); err != nil {
			t.Fatal(err)
		}
		return links
	}
	t.Fatal("the Makefile builds no image of ./test/standins/engine")
	return nil
}

// Every program an image's entrypoint or a command starts is one the
// stand-in runs, and its image has it where the image would (a path, or
// a name on the PATH).
func TestTablePrograms(t *testing.T) {
	links := engineLinks(t)
	onPath := func(name string) bool {
		return slices.ContainsFunc(links, func(l string) bool {
			return path.Base(l) == name && slices.Contains([]string{"/usr/local/bin", "/usr/bin", "/bin"}, path.Dir(l))
		})
	}
	for _, e := range table(t).Engines {
		var programs []string
		for _, i := range e.Images {
			if len(i.Entrypoint) > 0 {
				programs = append(programs, i.Entrypoint[0])
			}
		}
		for _, c := range runnable(e) {
			programs = append(programs, c.Argv[0])
		}
		for _, p := range programs {
			if commandFor(path.Base(p)) == nil {
				t.Errorf("engine %s: %s is not a program of the stand-in", e.Name, p)
			}
			if path.IsAbs(p) && !slices.Contains(links, p) || !path.IsAbs(p) && !onPath(p) {
				t.Errorf("engine %s: %s is not linked in the engine's image (links %q)", e.Name, p, links)
			}
		}
	}
}
