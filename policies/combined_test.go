package policies

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
)

func TestCombinable(t *testing.T) {
	cases := map[string]struct {
		module string
		want   bool
	}{
		"workload and parameters": {objectMsgs, true},
		"raw objects":             {readsObject, true},
		"own package in full": {module("package team.gpus", "", "limit := 2",
			`deny contains "over" if input.workload.gpu.count > data.team.gpus.limit`), true},
		"imported parameters": {module("package p", "", "import input.parameters as params",
			`deny contains "over" if input.workload.gpu.count > params.max`), true},
		"bare input": {module("package p", "", `deny contains "x" if { i := input; i.workload }`), false},
		"input[x]": {module("package p", "",
			`deny contains k if { some k; input[k] }`), false},
		"with input as": {module("package p", "", `x if input.workload`,
			`deny contains "x" if { x with input as {"workload": 1} }`), false},
		"another package": {module("package p", "",
			`deny contains "x" if data.q.deny`), false},
		"data itself": {module("package p", "",
			`deny contains "x" if { d := data; d.q }`), false},
		"data[x]": {module("package p", "",
			`deny contains "x" if { some k; data[k] }`), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mod := ast.MustParseModuleWithOpts(tc.module, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if got := combinable(mod); got != tc.want {
				t.Errorf("combinable() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCombinedKeepsPoliciesApart: policies that share a package and read
// their own parameters, one that names its package in full, and one that
// cannot be combined give the same answers in one query as in one each.
func TestCombinedKeepsPoliciesApart(t *testing.T) {
	ownPackage := module("package gpus", "", "limit := 0",
		`deny contains "over the package limit" if input.workload.gpu.count > data.gpus.limit`)
	whole := module("package whole", "", `warn contains sprintf("%d keys", [count(input)]) if true`)
	// Parameters read through some ... in and every, and inside a
	// function, comprehension and nested ref.
	registries := module("package registries", "",
		`deny contains c.image if { some c in input.workload.containers; not allowed(c.image) }`,
		`warn contains "all pinned" if every r in input.parameters.pinned { startswith(r, "sha256:") }`,
		`warn contains sprintf("%d registries", [n]) if {`,
		`  n := count([p | some p in input.parameters.registries]); n > input.parameters.limits[input.parameters.which]`, "}",
		`allowed(image) if { some prefix in input.parameters.registries; startswith(image, prefix) }`)
	policies := []Policy{
		{Name: "max-0", Module: objectMsgs, Parameters: map[string]any{"max": 0}},
		{Name: "max-99", Module: objectMsgs, Parameters: map[string]any{"max": 99}},
		{Name: "own-package", Module: ownPackage},
		{Name: "whole", Module: whole},
		{Name: "replicas", Module: readsObject, Parameters: map[string]any{"max": 1}},
		{Name: "registries-open", Module: registries, Parameters: map[string]any{
			"registries": []any{"vllm/", "ghcr.io/"}, "pinned": []any{"sha256:1"}, "limits": map[string]any{"x": 1}, "which": "x"}},
		{Name: "registries-closed", Module: registries, Parameters: map[string]any{
			"registries": []any{"nvcr.io/"}, "pinned": []any{"v1"}, "limits": map[string]any{"y": 0}, "which": "y"}},
	}
	wantDenials := []string{"[max-0] too many GPUs", "[own-package] over the package limit",
		"[registries-closed] ghcr.io/modelgate/exporter:v1", "[registries-closed] vllm/vllm-openai:v0.6.0",
		"[replicas] replicas 3 over 1"}
	wantWarnings := []string{"[registries-closed] 1 registries", "[registries-open] 2 registries", "[registries-open] all pinned",
		"[replicas] created", "[whole] 4 keys"}

	var cs []*Compiled
	for _, p := range policies {
		cs = append(cs, mustCompile(t, p))
	}
	review := Review{Workload: toValue(t, gpuWorkload()), Object: []byte(`{"spec": {"replicas": 3}}`)}
	for _, separate := range []bool{true, false} {
		e := NewEngine(Options{SeparateQueries: separate})
		set := NewSet(cs...)
		e.Swap(set)
		set.Prepare(context.Background())
		d := e.Evaluate(context.Background(), review)
		if diff := cmp.Diff(wantDenials, d.Denials()); diff != "" {
			t.Errorf("separate=%v: Denials() (-want +got):\n%s", separate, diff)
		}
		if diff := cmp.Diff(wantWarnings, d.Warnings()); diff != "" {
			t.Errorf("separate=%v: Warnings() (-want +got):\n%s", separate, diff)
		}
		if got, want := e.combinedEvals.Load() == 1, !separate; got != want {
			t.Errorf("separate=%v: evaluated in one query = %v, want %v", separate, got, want)
		}
	}
}

// TestCombinedFallsBack: a policy whose evaluation fails fails the
// combined query; the policies are then evaluated one by one, so only it
// has an error and the others decide.
func TestCombinedFallsBack(t *testing.T) {
	conflict := module("package conflict", "", "x := 1 if true", "x := 2 if true",
		`deny contains "never" if x == 3`)
	cs := []*Compiled{
		mustCompile(t, Policy{Name: "a-conflict", Module: conflict}),
		mustCompile(t, Policy{Name: "b", Module: denyAB}),
		mustCompile(t, Policy{Name: "c", Module: warnOnly}),
	}
	rec := &recorder{}
	e := NewEngine(Options{Observer: rec})
	set := NewSet(cs...)
	e.Swap(set)
	set.Prepare(context.Background())
	d := e.Evaluate(context.Background(), Review{})
	if got := e.combinedEvals.Load(); got != 0 {
		t.Errorf("reviews evaluated in one query = %d, want 0", got)
	}
	want := []observed{{"a-conflict", "error"}, {"b", "deny"}, {"c", "warn"}}
	if diff := cmp.Diff(want, rec.calls); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"[b] w", "[c] careful"}, d.Warnings()); diff != "" {
		t.Errorf("Warnings() (-want +got):\n%s", diff)
	}
}

// TestCombinedPreparedInTheBackground: a review before the combined query
// is ready is evaluated one query per policy, and starts preparing the
// query for its set of policies; a later review uses it.
func TestCombinedPreparedInTheBackground(t *testing.T) {
	cs := []*Compiled{
		mustCompile(t, Policy{Name: "a", Module: denyAB, Match: Match{Kinds: []string{"Pod"}}}),
		mustCompile(t, Policy{Name: "b", Module: warnOnly}),
		mustCompile(t, Policy{Name: "c", Module: allowAll}),
	}
	e := NewEngine(Options{SeparateQueries: true}) // no preparation on Swap
	set := NewSet(cs...)
	e.Swap(set)
	e.separate = false
	review := Review{Kind: "Deployment"} // a, the Pod policy, does not apply
	if d := e.Evaluate(context.Background(), review); len(d.Results) != 2 || e.combinedEvals.Load() != 0 {
		t.Fatalf("first review: %d results, %d in one query; want 2 and 0", len(d.Results), e.combinedEvals.Load())
	}
	key := queryKey([]int{1, 2})
	for ready := false; !ready; {
		set.combined.mu.Lock()
		q, ok := set.combined.queries[key]
		set.combined.mu.Unlock()
		if ok && q == nil {
			t.Fatalf("query of %s could not be prepared", key)
		}
		ready = ok
	}
	d := e.Evaluate(context.Background(), review)
	if diff := cmp.Diff([]string{"[b] careful"}, d.Warnings()); diff != "" {
		t.Errorf("Warnings() (-want +got):\n%s", diff)
	}
	if got := e.combinedEvals.Load(); got != 1 {
		t.Errorf("reviews evaluated in one query = %d, want 1", got)
	}
}
