package enginefacts

import (
	"strings"
	"testing"
)

func TestTableLoads(t *testing.T) {
	table, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vllm", "sglang", "tgi", "triton", "dynamo-frontend", "dynamo-worker", "llm-d-routing-sidecar"} {
		if _, ok := table.Engine(name); !ok {
			t.Errorf("engine %q is not in the table", name)
		}
	}
	tgi, _ := table.Engine("tgi")
	if got := tgi.DefaultPort(); got != "80" {
		t.Errorf("TGI's default port = %q, want the image's PORT 80", got)
	}
	vllm, _ := table.Engine("vllm")
	if got := vllm.DefaultPort(); got != "8000" {
		t.Errorf("vLLM's default port = %q, want 8000", got)
	}
}

func TestValidateRefuses(t *testing.T) {
	good := func() Engine {
		return Engine{Name: "e", Annotation: "e", Repository: "r", Release: "v1", Released: "x", Read: "x", Checked: "x",
			Images:    []Image{{Ref: "org/e:v1", Source: "s"}},
			Commands:  []Command{{Argv: []string{"e"}, Source: "s"}},
			Flags:     []Flag{{Names: []string{"--port"}, Role: RolePort, Source: "s"}},
			Endpoints: []Endpoint{{Path: "/health", Role: RoleReadiness, Ready: 200, Source: "s"}},
		}
	}
	if err := (&Table{Engines: []Engine{good()}}).Validate(); err != nil {
		t.Fatalf("a good table: %v", err)
	}
	cases := map[string]struct {
		change func(*Engine)
		want   string
	}{
		"flag without a source":   {func(e *Engine) { e.Flags[0].Source = "" }, `flag ["--port"] needs names, a source`},
		"unknown role":            {func(e *Engine) { e.Flags[0].Role = "speed" }, "one of the roles"},
		"image of another tag":    {func(e *Engine) { e.Images[0].Ref = "org/e:v0" }, `the release's tag "v1"`},
		"no readiness endpoint":   {func(e *Engine) { e.Endpoints[0].Role = RoleAlias }, "0 readiness endpoints"},
		"endpoint without status": {func(e *Engine) { e.Endpoints[0].Ready = 0 }, "its ready status"},
		"streams a format it lacks": {func(e *Engine) {
			e.Flags = append(e.Flags, Flag{Names: []string{"--load-format"}, Role: RoleLoadFormat, Source: "s", Streams: []string{"x"}})
		}, `streams "x"`},
		"neither annotated nor a sidecar": {func(e *Engine) { e.Annotation = "" }, "exactly one of annotation and sidecarOf"},
		"no release":                      {func(e *Engine) { e.Release = "" }, "release is required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := good()
			tc.change(&e)
			err := (&Table{Engines: []Engine{e}}).Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
