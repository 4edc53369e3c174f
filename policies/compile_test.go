package policies

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCompile(t *testing.T) {
	cases := map[string]struct {
		module string
		// want is the rendered CompileError; "" when the module compiles.
		want string
	}{
		"deny and warn": {
			module: module("package owner", "",
				"deny contains msg if {", `  input.workload.owner == ""`, `  msg := "no owner"`, "}",
				"warn contains msg if {", `  input.workload.team == ""`, `  msg := "no team"`, "}"),
		},
		"warn only, object message": {
			module: module("package probes", "",
				"warn contains {\"msg\": \"no probe\", \"details\": {\"container\": c.name}} if {",
				"  some c in input.workload.containers", "  not c.readinessProbe", "}"),
		},
		"parse error": {
			module: module("package p", "", "deny contains msg if {", "  msg := ", "}"),
			want:   "policy.rego:5:1: rego_parse_error: unexpected } token\n\t}\n\t^",
		},
		"type error": {
			module: module("package p", "", "deny contains msg if {", `  msg := 1 + "a"`, "}"),
			want: "policy.rego:4:10: rego_type_error: plus: invalid argument(s)\n" +
				"\thave: (number, string, ???)\n\twant: (x: number, y: number, z: number)",
		},
		"unsafe variable": {
			module: module("package p", "", "deny contains msg if {", "    msg := y", "}"),
			want:   "policy.rego:4:5: rego_unsafe_var_error: var y is unsafe",
		},
		"network builtin is not available": {
			module: module("package p", "", "deny contains msg if {",
				`  r := http.send({"method": "get", "url": "http://example.com"})`, "  msg := r.body", "}"),
			want: "policy.rego:4:8: modelgate_builtin_error: http.send is not available to admission policies: " +
				`admission decides from the review alone: no network calls; see docs/policies.md "Builtins"`,
		},
		"neither deny nor warn": {
			module: module("package p", "", "allow if true"),
			want: "policy.rego:1:1: modelgate_contract_error: module defines neither deny nor warn: " +
				"a policy needs deny contains msg if { ... } or warn contains msg if { ... }",
		},
		"deny is not a set": {
			module: module("package p", "", `warn contains "w" if true`, "", `deny := {"a"}`),
			want:   "policy.rego:5:1: modelgate_contract_error: deny must be a set of messages: deny contains msg if { ... }",
		},
		"deny is an object": {
			module: module("package p", "", `deny[msg] if msg := "a"`),
			want:   "policy.rego:3:1: modelgate_contract_error: deny must be a set of messages: deny contains msg if { ... }",
		},
		"rego v0 syntax": {
			module: module("package p", "", "deny[msg] {", `  msg := "a"`, "}"),
			want: "policy.rego:3:1: rego_parse_error: `if` keyword is required before rule body\n" +
				"policy.rego:3:1: rego_parse_error: `contains` keyword is required for partial set rules",
		},
		"empty module": {
			module: "",
			want:   "policy.rego: rego_parse_error: empty module",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Compile(context.Background(), Policy{Name: "policy", Module: tc.module})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if c.Name() != "policy" || c.Filename() != "policy.rego" || c.Action() != ActionDeny || c.FailurePolicy() != FailDeny {
					t.Errorf("Compile defaults: name %q file %q action %q failure %q", c.Name(), c.Filename(), c.Action(), c.FailurePolicy())
				}
				return
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error = %v (%T), want a *CompileError", err, err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompileSettings(t *testing.T) {
	const mod = "package p\n\ndeny contains \"x\" if true\n"
	cases := map[string]struct {
		policy Policy
		want   string
	}{
		"no name": {
			policy: Policy{Module: mod},
			want:   "policy name must not be empty",
		},
		"bad action": {
			policy: Policy{Name: "p", Module: mod, Action: "block"},
			want:   `enforcement action "block" is not valid: can only be one of deny, warn, dryrun`,
		},
		"bad failure policy": {
			policy: Policy{Name: "p", Module: mod, FailurePolicy: "ignore"},
			want:   `failure policy "ignore" is not valid: can only be one of deny, allow`,
		},
		"bad selector": {
			policy: Policy{Name: "p", Module: mod, Match: Match{NamespaceSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}},
			}}},
			want: `match.namespaceSelector: "Near" is not a valid label selector operator`,
		},
		"parameters that are not JSON": {
			policy: Policy{Name: "p", Module: mod, Parameters: map[string]any{"f": func() {}}},
			want:   "parameters: ast: interface conversion: json: unsupported type: func()",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(context.Background(), tc.policy)
			if err == nil {
				t.Fatal("Compile succeeded, want an error")
			}
			var ce *CompileError
			if errors.As(err, &ce) {
				t.Errorf("Compile error is a *CompileError, want a settings error: %v", err)
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNeedsObjects(t *testing.T) {
	cases := map[string]struct {
		body string
		want bool
	}{
		"workload only":          {body: `input.workload.kind == "Pod"`},
		"workload index":         {body: `some c in input.workload.containers; c.privileged`},
		"workload by string key": {body: `input["workload"].kind == "Pod"`},
		"parameters":             {body: `input.workload.gpu.count > input.parameters.max`},
		"data is not input":      {body: `data.p.x == 1`},
		"object":                 {body: `input.object.spec.replicas > 1`, want: true},
		"old object":             {body: `input.oldObject == null`, want: true},
		"dynamic key":            {body: `some x; input[x].kind == "Pod"`, want: true},
		"bare input":             {body: `object.get(input, ["object", "kind"], "") == "Pod"`, want: true},
		"object in a key":        {body: `input.workload.labels[input.object.kind]`, want: true},
		"object in a comprehension": {
			body: `count([k | some k, _ in input.object.metadata.labels]) > 0`, want: true,
		},
		"with input": {body: `data.p.helper with input as {}`, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustCompile(t, Policy{Name: "p", Module: module("package p", "",
				"x := 1", "helper if true", "", "deny contains \"m\" if {", "  "+tc.body, "}")})
			if got := c.NeedsObjects(); got != tc.want {
				t.Errorf("NeedsObjects() = %v, want %v", got, tc.want)
			}
			if got := NewSet(c).NeedsObjects(); got != tc.want {
				t.Errorf("Set.NeedsObjects() = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("import", func(t *testing.T) {
		c := mustCompile(t, Policy{Name: "p", Module: module("package p", "", "import input.object as obj", "",
			"deny contains \"m\" if obj.kind == \"Pod\"")})
		if !c.NeedsObjects() {
			t.Error("NeedsObjects() = false for import input.object, want true")
		}
	})
}

func TestWorkloadReads(t *testing.T) {
	all := []string{"*"}
	cases := map[string]struct {
		body string
		want []string // the keys read, or all
	}{
		"one key":             {body: `input.workload.kind == "Pod"`, want: []string{"kind"}},
		"nested":              {body: `some c in input.workload.containers; c.privileged; input.workload.gpu.count > 1`, want: []string{"containers", "gpu"}},
		"string key":          {body: `input.workload["labels"].app == "x"`, want: []string{"labels"}},
		"by string top key":   {body: `input["workload"].kind == "Pod"`, want: []string{"kind"}},
		"parameters, object":  {body: `input.object.kind == input.parameters.kind`, want: []string{}},
		"key in a key":        {body: `input.workload.labels[input.workload.name]`, want: []string{"labels", "name"}},
		"data is not input":   {body: `data.p.x == 1`, want: []string{}},
		"the whole view":      {body: `object.get(input.workload, ["labels", "x"], "") == "y"`, want: all},
		"assigned":            {body: `w := input.workload; w.labels.x == "y"`, want: all},
		"dynamic key":         {body: `some k; input.workload[k] == "x"`, want: all},
		"dynamic top key":     {body: `some x; input[x].kind == "Pod"`, want: all},
		"bare input":          {body: `count(input) > 0`, want: all},
		"with input":          {body: `data.p.helper with input as {}`, want: all},
		"with a workload key": {body: `data.p.helper with input.workload.kind as "Pod"`, want: []string{"kind"}},
		"in a comprehension":  {body: `count([k | some k, _ in input.workload.annotations]) > 0`, want: []string{"annotations"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustCompile(t, Policy{Name: "p", Module: module("package p", "",
				"x := 1", "helper if true", "", "deny contains \"m\" if {", "  "+tc.body, "}")})
			for _, set := range []interface{ has(string) bool }{&c.reads, &NewSet(c).reads} {
				for _, key := range []string{"kind", "labels", "annotations", "containers", "gpu", "name", "model", "namespaceLabels"} {
					want := slices.Equal(tc.want, all) || slices.Contains(tc.want, key)
					if got := set.has(key); got != want {
						t.Errorf("reads %q = %v, want %v", key, got, want)
					}
				}
			}
		})
	}
	t.Run("import", func(t *testing.T) {
		c := mustCompile(t, Policy{Name: "p", Module: module("package p", "", "import input.workload as w", "",
			"deny contains \"m\" if w.kind == \"Pod\"")})
		if !c.ReadsWorkloadKey("annotations") {
			t.Error("import input.workload reads no annotations, want every key")
		}
	})
	t.Run("set", func(t *testing.T) {
		a := mustCompile(t, Policy{Name: "a", Module: module("package a", "", `deny contains "m" if input.workload.kind == "Pod"`)})
		b := mustCompile(t, Policy{Name: "b", Module: module("package b", "", `deny contains "m" if input.workload.gpu.count > 1`)})
		s := NewSet(a, b)
		if !s.reads.has("kind") || !s.reads.has("gpu") || s.reads.has("labels") {
			t.Errorf("the set reads %v, want kind and gpu", s.reads.names)
		}
	})
}

// Builtins that allocate without bound in one call, reach out or depend on
// the clock are refused at compile time, at the call's line, with why.
func TestCompileRefusesBuiltins(t *testing.T) {
	cases := map[string]struct {
		call, why string
	}{
		"numbers.range":      {`numbers.range(1, 1e9)`, "it allocates an array as long as the range"},
		"numbers.range_step": {`numbers.range_step(1, 1e9, 1)`, "it allocates an array as long as the range"},
		"net.cidr_expand":    {`net.cidr_expand("10.0.0.0/8")`, "one string per address"},
		"replace":            {`replace(input.workload.name, "", "xxxxxxxx")`, "its output can be its input times"},
		"strings.replace_n":  {`strings.replace_n({"": "xx"}, input.workload.name)`, "its output can be its input times"},
		"regex.replace":      {`regex.replace(input.workload.name, "", "xx")`, "its output can be its input times"},
		"time.now_ns":        {`time.now_ns()`, "must not depend on the clock"},
		"io.jwt.decode":      {`io.jwt.decode(input.workload.name)`, "token signing and verification"},
		"opa.runtime":        {`opa.runtime()`, "environment"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mod := module("package p", "", "deny contains msg if {", "  x := "+tc.call, "  msg := sprintf(\"%v\", [x])", "}")
			_, err := Compile(context.Background(), Policy{Name: "policy", Module: mod})
			var ce *CompileError
			if !errors.As(err, &ce) || len(ce.Problems) != 1 {
				t.Fatalf("Compile error = %v, want one problem", err)
			}
			p := ce.Problems[0]
			if p.Code != CodeBuiltin || p.Row != 4 || !strings.HasPrefix(p.Message, name+" is not available to admission policies: ") ||
				!strings.Contains(p.Message, tc.why) {
				t.Errorf("problem = %+v, want %s at row 4 naming %s and %q", p, CodeBuiltin, name, tc.why)
			}
		})
	}
}

// Every allowed builtin exists in this OPA, and the shipped library
// compiles with them alone (make test-policies runs it).
func TestAllowedBuiltinsExist(t *testing.T) {
	for _, name := range allowedBuiltins {
		if !slices.ContainsFunc(capabilities().Builtins, func(b *ast.Builtin) bool { return b.Name == name }) {
			t.Errorf("allowed builtin %s is not one of this OPA's", name)
		}
		if refusal(name) != "" && refusedBuiltins[name] != "" {
			t.Errorf("%s is both allowed and refused", name)
		}
	}
	for name := range refusedBuiltins {
		if slices.Contains(allowedBuiltins, name) {
			t.Errorf("%s is both allowed and refused", name)
		}
	}
}
