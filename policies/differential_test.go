package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The differential check at the level of the language: generated Rego
// policies over the view, in every form the engine's readings must see
// through (rule head refs, else, with, comprehensions, every, functions,
// imports, refs built from variables, walk, object.get with computed
// paths, reads through the module's own rules in data, template strings,
// negations, parameters), times generated workloads. The engine's
// admission path (partial view, combined query, guarded reads, decision
// cache; each review repeated, then renamed) must give every policy the
// messages plain OPA gives the module alone on the whole input.

// genForms are the forms a generated policy is made of: each returns the
// rules of one form, numbered n, reading field f (a scalar key of the
// view) and comparing with the constant c.
var genForms = []func(n int, f, c string) string{
	// A read in the body.
	func(n int, f, c string) string {
		return fmt.Sprintf("deny contains \"body%d\" if input.workload.%s == %s", n, f, c)
	},
	// The only read in a rule head's ref (the finding of issue 42).
	func(n int, f, _ string) string {
		return fmt.Sprintf("by%d[input.workload.%s] contains c.name if {\n\tsome c in input.workload.containers\n\tc.privileged\n}\n"+
			"deny contains sprintf(\"head%d %%v %%v\", [k, v]) if some k, v in by%d", n, f, n, n)
	},
	// The name in a head ref, the rest in the body.
	func(n int, _, _ string) string {
		return fmt.Sprintf("gpus%d[input.workload.name] := input.workload.gpu.count if input.workload.gpu.count > 1\n"+
			"deny contains sprintf(\"named%d %%v\", [k]) if some k, _ in gpus%d", n, n, n)
	},
	// else chains.
	func(n int, f, c string) string {
		return fmt.Sprintf("level%d := \"high\" if input.workload.gpu.count > 1 else := \"host\" if input.workload.%s == %s else := \"low\"\n"+
			"deny contains sprintf(\"else%d %%s\", [level%d]) if level%d != \"low\"", n, f, c, n, n, n)
	},
	// with, on input and on data.
	func(n int, f, c string) string {
		return fmt.Sprintf("hit%d if input.workload.%s == %s\n"+
			"deny contains \"with%d\" if hit%d with input.workload.owner as \"x\"\n"+
			"seen%d := data.nowhere.v%d\n"+
			"deny contains sprintf(\"withdata%d %%v\", [x]) if { x := seen%d with data.nowhere.v%d as input.workload.team }", n, f, c, n, n, n, n, n, n, n)
	},
	// Comprehensions.
	func(n int, _, _ string) string {
		return fmt.Sprintf("deny contains sprintf(\"comp%d %%v\", [names]) if {\n\tnames := {c.name | some c in input.workload.containers; c.gpus > 0}\n\tcount(names) > 1\n}\n"+
			"deny contains sprintf(\"objcomp%d %%v\", [ls]) if {\n\tls := {k: v | some k, v in input.workload.labels; startswith(k, \"app\")}\n\tcount(ls) > 0\n}", n, n)
	},
	// every.
	func(n int, _, _ string) string {
		return fmt.Sprintf("deny contains \"every%d\" if {\n\tcount(input.workload.containers) > 0\n\tevery c in input.workload.containers { c.gpus > 0 }\n}", n)
	},
	// Functions, given a key and the whole view.
	func(n int, f, c string) string {
		return fmt.Sprintf("is%d(x) if x == %s\nget%d(w) := w.%s\n"+
			"deny contains \"fn%d\" if is%d(input.workload.%s)\n"+
			"deny contains sprintf(\"fnall%d %%v\", [get%d(input.workload)]) if get%d(input.workload) == %s", n, c, n, f, n, n, f, n, n, n, c)
	},
	// Imports.
	func(n int, f, c string) string {
		return fmt.Sprintf("deny contains \"import%d\" if imported.%s == %s", n, f, c)
	},
	// Refs built from variables.
	func(n int, f, _ string) string {
		return fmt.Sprintf("deny contains sprintf(\"dyn%d %%v\", [k]) if {\n\tsome k in [\"%s\", \"hostNetwork\"]\n\tinput.workload[k] == true\n}", n, f)
	},
	// walk.
	func(n int, _, c string) string {
		return fmt.Sprintf("deny contains sprintf(\"walk%d %%v\", [p]) if {\n\twalk(input.workload, [p, v])\n\tv == %s\n\tcount(p) < 3\n}", n, c)
	},
	// object.get with a computed path.
	func(n int, f, c string) string {
		return fmt.Sprintf("deny contains \"objget%d\" if {\n\tpath := [\"%s\"]\n\tobject.get(input.workload, path, \"none\") == %s\n}", n, f, c)
	},
	// Reads through the module's own rules in data.
	func(n int, f, c string) string {
		return fmt.Sprintf("val%d := input.workload.%s\n"+
			"deny contains \"data%d\" if data[PKG].val%d == %s", n, f, n, n, c)
	},
	// Template strings.
	func(n int, f, _ string) string {
		return fmt.Sprintf("deny contains $\"tmpl%d {input.workload.%s} {input.workload.name}\" if input.workload.gpu.count > 0", n, f)
	},
	// Negations, of the name and of a field.
	func(n int, f, c string) string {
		return fmt.Sprintf("deny contains \"not%d\" if not input.workload.name == \"llama\"\n"+
			"deny contains \"notf%d\" if { input.workload.gpu.count > 0; not input.workload.%s == %s }", n, n, f, c)
	},
	// Parameters, in the body and in a head ref.
	func(n int, _, _ string) string {
		return fmt.Sprintf("deny contains sprintf(\"param%d %%v\", [input.parameters.max]) if input.workload.gpu.count > input.parameters.max\n"+
			"lim%d[input.parameters.label] := input.workload.labels[input.parameters.label]\n"+
			"deny contains sprintf(\"paramhead%d %%v\", [v]) if some _, v in lim%d", n, n, n, n)
	},
	// Reads in a rule head's key and in details.
	func(n int, f, _ string) string {
		return fmt.Sprintf("deny contains {\"msg\": sprintf(\"key%d %%v\", [input.workload.%s]), \"details\": {\"labels\": input.workload.labels}} if input.workload.hostNetwork", n, f)
	},
	// A key read through another key, and the name in a message.
	func(n int, _, _ string) string {
		return fmt.Sprintf("deny contains sprintf(\"nested%d %%v\", [input.workload.labels[input.workload.team]]) if true\n"+
			"deny contains sprintf(\"msgname%d %%s\", [input.workload.name]) if input.workload.owner == \"\"", n, n)
	},
	// The raw object.
	func(n int, _, _ string) string {
		return fmt.Sprintf("deny contains sprintf(\"object%d %%v\", [input.object.metadata.name]) if input.object.kind == \"Pod\"", n)
	},
}

// genFields are scalar keys of the view the forms read, and genConsts
// the constants they compare them with (the values workloads take).
var (
	genFields = []string{"name", "kind", "owner", "team", "hostNetwork", "servingContainer", "namespace"}
	genNames  = []string{"llama", "vllm", "vllmllama", "a"}
	genConsts = []string{`"llama"`, `"vllm"`, `"Pod"`, `"alice"`, `"nlp"`, `true`, `""`}
)

// genPolicy returns a generated policy of 1 to 3 forms, in package pkg.
func genPolicy(r *rand.Rand, name, pkg string) Policy {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	var body strings.Builder
	for n := range 1 + r.IntN(3) {
		form := genForms[r.IntN(len(genForms))]
		rules := form(n, genFields[r.IntN(len(genFields))], genConsts[r.IntN(len(genConsts))])
		body.WriteString(strings.ReplaceAll(rules, "PKG", fmt.Sprintf("%q", pkg)) + "\n\n")
	}
	if strings.Contains(body.String(), "imported.") {
		b.WriteString("import input.workload as imported\n\n")
	}
	b.WriteString(body.String())
	return Policy{Name: name, Module: b.String(), Parameters: map[string]any{
		"max": r.IntN(3), "label": []string{"app", "modelgate.io/team"}[r.IntN(2)],
	}}
}

// genWorkload returns a generated view; keys are absent at times.
func genWorkload(r *rand.Rand) map[string]any {
	pick := func(xs ...any) any { return xs[r.IntN(len(xs))] }
	var containers []any
	for range r.IntN(4) {
		containers = append(containers, map[string]any{
			"name": genNames[r.IntN(len(genNames))], "privileged": r.IntN(2) == 0, "gpus": r.IntN(3),
		})
	}
	team := pick("", "nlp")
	wl := map[string]any{
		"kind": pick("Pod", "Deployment"), "name": genNames[r.IntN(len(genNames))], "namespace": pick("team-a", "team-b"),
		"owner": pick("", "alice"), "team": team, "hostNetwork": r.IntN(2) == 0,
		"servingContainer": genNames[r.IntN(len(genNames))],
		"labels":           map[string]any{"app": genNames[r.IntN(len(genNames))], "nlp": "yes", "modelgate.io/team": team},
		"containers":       containers,
		"gpu":              map[string]any{"count": r.IntN(4)},
	}
	for _, k := range []string{"owner", "team", "labels", "containers", "gpu", "servingContainer"} {
		if r.IntN(8) == 0 {
			delete(wl, k)
		}
	}
	return wl
}

// differential generates a Set of policies and workloads from seed and
// compares the two paths on them (see compareAdmission).
func differential(t testing.TB, seed uint64, policies, workloads int) int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed>>32|1))
	var ps []Policy
	for i := range policies {
		pkg := fmt.Sprintf("g%d", i)
		if r.IntN(4) == 0 {
			pkg = "shared" // packages of the same name keep apart when combined
		}
		ps = append(ps, genPolicy(r, fmt.Sprintf("p%d", i), pkg))
	}
	var wls []map[string]any
	for range workloads {
		wl := genWorkload(r)
		renamed := maps.Clone(wl)
		renamed["name"] = genNames[r.IntN(len(genNames))] + "x"
		// Each review twice (the second may come from the cache), then
		// renamed (the guard must not answer one name with another's).
		wls = append(wls, wl, wl, renamed)
	}
	return compareAdmission(t, fmt.Sprintf("seed %d", seed), ps, wls)
}

// compareAdmission fails t at the first review where the admission path
// (one Set of all the policies, prepared for a combined query, with a
// decision cache; and again a query per policy) and plain OPA give a policy
// different messages. It returns the pairs of policy and review compared.
func compareAdmission(t testing.TB, label string, ps []Policy, workloads []map[string]any) int {
	t.Helper()
	ctx := context.Background()
	var compiled []*Compiled
	plain := map[string]*Plain{}
	params := map[string]*ast.Term{}
	for _, p := range ps {
		c, err := Compile(ctx, p)
		if err != nil {
			t.Fatalf("%s: the policy does not compile: %v\n%s", label, err, p.Module)
		}
		pl, err := CompilePlain(ctx, p)
		if err != nil {
			t.Fatalf("%s: plain compile: %v\n%s", label, err, p.Module)
		}
		compiled, plain[p.Name], params[p.Name] = append(compiled, c), pl, c.params
	}
	set := NewSet(compiled...)
	set.Prepare(ctx)
	engines := map[string]*Engine{
		"cached, combined": NewEngine(Options{Cache: NewDecisionCache(1 << 20)}),
		"separate":         NewEngine(Options{SeparateQueries: true}),
	}
	for _, e := range engines {
		e.Swap(set)
	}
	pairs := 0
	for i, wl := range workloads {
		obj := map[string]any{"kind": wl["kind"], "metadata": map[string]any{"name": wl["name"]}}
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		view := toValue(t, wl).(ast.Object)
		for name, e := range engines {
			d := e.Evaluate(ctx, Review{Kind: "Deployment", Namespace: "team-a", View: NewObjectView(view), Object: raw})
			if len(d.Results) != len(compiled) {
				t.Fatalf("%s %s: %d results, want %d", label, name, len(d.Results), len(compiled))
			}
			for _, res := range d.Results {
				input := ast.NewObject(
					[2]*ast.Term{workloadKey, ast.NewTerm(view)},
					[2]*ast.Term{objectKey, ast.NewTerm(toValue(t, obj))},
					[2]*ast.Term{oldObjectKey, nullTerm},
					[2]*ast.Term{parametersKey, params[res.Policy]},
				)
				want := plain[res.Policy].Evaluate(ctx, input)
				if same, how := SameMessages(want, res); !same {
					var mod string
					for _, p := range ps {
						if p.Name == res.Policy {
							mod = p.Module
						}
					}
					t.Fatalf("%s, review %d, %s, policy %s: plain OPA and the admission path differ: %s\nworkload %v\nmodule:\n%s",
						label, i, name, res.Policy, how, wl, mod)
				}
				pairs++
			}
		}
	}
	return pairs
}

// TestDifferential runs the fixed corpus: enough seeds for thousands of
// pairs, every form of genForms among them.
func TestDifferential(t *testing.T) {
	pairs := 0
	for seed := range uint64(120) {
		pairs += differential(t, seed, 3, 6)
	}
	if pairs < 3000 {
		t.Fatalf("compared %d pairs of policy and review, want at least 3000", pairs)
	}
	t.Logf("compared %d pairs", pairs)
}

// FuzzDifferential runs the differential check for as long as it is given.
func FuzzDifferential(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		differential(t, seed, 3, 4)
	})
}

// The findings of issue 42, each as a user met it: the admission path must
// deny what OPA denies.
func TestAdmissionAsOPADecides(t *testing.T) {
	privileged := func(name string) map[string]any {
		wl := gpuWorkload()
		wl["name"] = name
		wl["containers"] = []any{map[string]any{"name": "vllm", "privileged": true, "gpus": 1}}
		return wl
	}
	cases := map[string]struct {
		policies  []Policy
		workloads []map[string]any
	}{
		"a field read only in a rule head's ref": {
			policies: []Policy{{Name: "no-privileged-gpu", Module: module("package nopriv", "",
				"by_serving[input.workload.servingContainer] contains c.name if {",
				"  some c in input.workload.containers", "  c.privileged", "  c.gpus > 0", "}",
				"deny contains sprintf(\"privileged GPU container %s\", [n]) if {",
				"  some _, names in by_serving", "  some n in names", "}")}},
			workloads: []map[string]any{privileged("llama")},
		},
		"the name read only in a rule head's ref, cached": {
			policies: []Policy{{Name: "named", Module: module("package named", "",
				"by_name[input.workload.name] contains c.name if {",
				"  some c in input.workload.containers", "  c.privileged", "}",
				"deny contains sprintf(\"%s runs %s privileged\", [k, n]) if {",
				"  some k, names in by_name", "  some n in names", "}")}},
			workloads: []map[string]any{privileged("llama"), privileged("llama"), privileged("mistral"), privileged("llama")},
		},
		"parameters read only in a rule head's ref, in a combined query": {
			policies: []Policy{
				{Name: "labels", Parameters: map[string]any{"label": "app"}, Module: module("package p", "",
					"lim[input.parameters.label] := input.workload.labels[input.parameters.label]",
					"deny contains sprintf(\"label %s\", [v]) if some _, v in lim")},
				{Name: "other", Parameters: map[string]any{"label": "team"}, Module: module("package p", "",
					"deny contains \"hostNetwork\" if input.workload.hostNetwork")},
			},
			workloads: []map[string]any{privileged("llama")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			compareAdmission(t, name, tc.policies, tc.workloads)
			// The cases are worth checking: plain OPA denies each.
			p, err := CompilePlain(context.Background(), tc.policies[0])
			if err != nil {
				t.Fatal(err)
			}
			in := toValue(t, map[string]any{"workload": tc.workloads[0], "parameters": tc.policies[0].Parameters})
			if res := p.Evaluate(context.Background(), in); len(res.Deny) == 0 {
				t.Fatalf("plain OPA allows the first workload (%v): the case proves nothing", res.Err)
			}
		})
	}
}
