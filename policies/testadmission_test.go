package policies

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
)

// gpuServingRego reads input.workload.servingContainer only in the ref of
// a rule's head, and the name in its message.
const gpuServingRego = `package gpuserving

# by_c maps the serving container to the containers that ask for GPUs.
by_c[input.workload.servingContainer] contains c.name if {
	some c in input.workload.containers
	c.gpus > 0
}

deny contains sprintf("workload %q: %d GPU containers beside serving container %q", [input.workload.name, count(names), s]) if {
	some s, names in by_c
	s != ""
}
`

const gpuServingTests = `package gpuserving_test

import data.gpuserving

review(containers) := {
	"workload": {"kind": "Pod", "name": "llama", "namespace": "team-a", "servingContainer": "vllm", "containers": containers},
	"object": {}, "oldObject": null, "parameters": {},
}

test_denies_gpu_containers if {
	gpuserving.deny == {"workload \"llama\": 1 GPU containers beside serving container \"vllm\""} with input as review([{"name": "vllm", "gpus": 1}])
}

test_allows_without_gpus if {
	count(gpuserving.deny) == 0 with input as review([{"name": "vllm", "gpus": 0}])
}

test_allows_without_containers if {
	count(gpuserving.deny) == 0 with input as review([])
}

test_allows_a_cpu_sidecar if {
	count(gpuserving.deny) == 0 with input as review([{"name": "vllm", "gpus": 0}, {"name": "proxy", "gpus": 0}])
}
`

// paramGPUsRego reads a parameter.
const paramGPUsRego = `package maxgpus

deny contains sprintf("%d GPUs, at most %d", [input.workload.gpus, limit]) if {
	limit := object.get(input.parameters, "max", 8)
	input.workload.gpus > limit
}
`

const paramGPUsTests = `package maxgpus_test

import data.maxgpus

review(gpus, params) := {"workload": {"kind": "Pod", "name": "x", "gpus": gpus}, "object": {}, "oldObject": null, "parameters": params}

test_default if {
	maxgpus.deny == {"9 GPUs, at most 8"} with input as review(9, {})
}

test_parameter if {
	maxgpus.deny == {"2 GPUs, at most 1"} with input as review(2, {"max": 1})
	count(maxgpus.deny) == 0 with input as review(2, {"max": 3})
}
`

// droppingView is a View that leaves out a key the policies read: the
// wrong reading the check must catch.
type droppingView struct {
	*ObjectView
	drop string
}

func (v droppingView) without(read func(string) bool) func(string) bool {
	return func(k string) bool { return k != v.drop && (read == nil || read(k)) }
}

func (v droppingView) ValueOf(read func(string) bool) ast.Value {
	return v.ObjectView.ValueOf(v.without(read))
}

func (v droppingView) AppendKey(buf []byte, read func(string) bool) []byte {
	return v.ObjectView.AppendKey(buf, v.without(read))
}

// namelessKeyView gives the whole value but keys reviews without the name:
// a cache that answers for one workload with another's messages.
type namelessKeyView struct{ *ObjectView }

func (v namelessKeyView) AppendKey(buf []byte, read func(string) bool) []byte {
	return v.ObjectView.AppendKey(buf, func(k string) bool { return k != "name" && (read == nil || read(k)) })
}

// A test passes only when the admission path answers each of its inputs
// as OPA does; the views that read less than the policies do prove that
// the check fails where the cluster would differ.
func TestRunTestsJudgesAsTheCluster(t *testing.T) {
	library := map[string]string{
		"gpuserving.rego": gpuServingRego, "gpuserving_test.rego": gpuServingTests,
		"maxgpus.rego": paramGPUsRego, "maxgpus_test.rego": paramGPUsTests,
	}
	denied := `["workload \"llama\": 1 GPU containers beside serving container \"vllm\""]`
	cases := map[string]struct {
		files map[string]string
		view  func(ast.Object) View
		want  string
		// fails are the failing tests' differences: "row: message".
		fails map[string][]string
		notes map[string]string
	}{
		"the engine's view, a head ref's read and parameters": {
			files: library,
			want:  "6 passed, 0 failed",
		},
		"a view without the key read in a head ref": {
			files: library,
			view: func(o ast.Object) View {
				return droppingView{NewObjectView(o), "servingContainer"}
			},
			want: "5 passed, 1 failed",
			fails: map[string][]string{"test_denies_gpu_containers": {
				"11: the cluster would enforce this differently: OPA denies " + denied + ", the admission path allows",
			}},
		},
		"a cache keyed without the name": {
			files: library,
			view:  func(o ast.Object) View { return namelessKeyView{NewObjectView(o)} },
			want:  "5 passed, 1 failed",
			fails: map[string][]string{"test_denies_gpu_containers": {
				`11: the cluster would enforce this differently for a workload named "llama-renamed": ` +
					`OPA denies ["workload \"llama-renamed\": 1 GPU containers beside serving container \"vllm\""], the admission path denies ` + denied,
			}},
		},
		"an input without the keys the cluster always sends": {
			files: map[string]string{
				"created.rego": "package created\n\ndeny contains \"created\" if input.oldObject == null\n",
				"created_test.rego": "package created_test\n\nimport data.created\n\n" +
					"test_allows_an_update if {\n\tcount(created.deny) == 0 with input as {\"workload\": {\"kind\": \"Pod\"}}\n}\n\n" +
					"test_denies_a_create if {\n\tcreated.deny == {\"created\"} with input as {\"workload\": {\"kind\": \"Pod\"}, \"object\": {}, \"oldObject\": null, \"parameters\": {}}\n}\n",
			},
			want: "1 passed, 1 failed",
			fails: map[string][]string{"test_allows_an_update": {
				`6: the cluster would enforce this differently: OPA allows, the admission path denies ["created"]`,
			}},
			notes: map[string]string{"test_allows_an_update": "it has no object, oldObject, parameters (the cluster sends null, and {} for parameters)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for file, src := range tc.files {
				fsys[file] = &fstest.MapFile{Data: []byte(src)}
			}
			sum, err := runTests(context.Background(), fsys, tc.view)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sum.String()); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			fails, notes := map[string][]string{}, map[string]string{}
			for _, r := range sum.Results {
				if r.Outcome == "error" {
					t.Errorf("%s: %v", r.Name, r.Err)
				}
				for _, d := range r.Differences {
					fails[r.Name] = append(fails[r.Name], strconv.Itoa(d.Row)+": "+d.Message())
					if d.Input == "" {
						t.Errorf("%s: a difference without its input", r.Name)
					}
					if d.Note != "" {
						notes[r.Name] = d.Note
					}
				}
				if (r.Outcome == "fail") != (len(r.Differences) > 0) {
					t.Errorf("%s: outcome %s with %d differences", r.Name, r.Outcome, len(r.Differences))
				}
			}
			if diff := cmp.Diff(tc.fails, fails, cmpEmpty); diff != "" {
				t.Errorf("differences (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.notes, notes, cmpEmpty); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpEmpty makes nil and empty maps equal.
var cmpEmpty = cmp.FilterValues(func(a, b any) bool {
	return mapLen(a) == 0 && mapLen(b) == 0
}, cmp.Ignore())

func mapLen(x any) int {
	switch m := x.(type) {
	case map[string][]string:
		return len(m)
	case map[string]string:
		return len(m)
	}
	return -1
}

// instrumentedPolicy answers every input, so that each with is evaluated.
const instrumentedPolicy = "package p\n\ndeny contains \"x\" if input.never\n"

const instrumentedTests = `package p_test

import data.p

deny_of(x) := d if {
	d := p.deny with input as x
}

seen[count([1 | p.deny == set() with input as {"head": 1}])] := true

test_whole if {
	p.deny == set() with input as {"a": 1}
}

test_part if {
	p.deny == set() with input.workload as {"b": 2}
}

test_layers if {
	p.deny == set() with input as {"workload": {"name": "a", "x": 1}} with input.workload.name as "b"
}

test_helper if {
	deny_of({"c": 3}) == set()
}

test_every if {
	every k in [1, 2] {
		p.deny == set() with input as {"k": k}
	}
}

test_comprehension if {
	count([d | some k in [1]; d := p.deny with input as {"k": k}]) == 1
}

test_negated if {
	not p.deny["x"] with input as {"n": 1}
}

test_head_ref if {
	seen[1]
}

test_twice if {
	p.deny == set() with input as {"a": 1}
	p.deny == set() with input as {"a": 1}
}

test_undefined_value if {
	not p.deny["x"] with input as data.nothing
}

test_failing if {
	p.deny == {"x"} with input as {"f": 1}
}

test_erroring if {
	p.deny == set() with input as {"e": 1 / 0}
}

todo_test_later if {
	p.deny == set() with input as {"todo": 1}
}
`

// Every form of with on input gives the input its expression sees, under
// the test that ran it, each once; and the tests' outcomes are those of
// the module as written.
func TestInstrumentTestsCapturesInputs(t *testing.T) {
	parse := func() map[string]*ast.Module {
		mods := map[string]*ast.Module{}
		for file, src := range map[string]string{"p.rego": instrumentedPolicy, "p_test.rego": instrumentedTests} {
			m, err := ast.ParseModuleWithOpts(file, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Fatal(err)
			}
			mods[file] = m
		}
		return mods
	}
	outcomes := func(results []TestResult) map[string]string {
		out := map[string]string{}
		for _, r := range results {
			out[r.Name] = r.Outcome
		}
		return out
	}
	plain, _, err := runGroup(context.Background(), parse())
	if err != nil {
		t.Fatal(err)
	}
	mods := parse()
	if err := instrumentTests(mods["p_test.rego"]); err != nil {
		t.Fatal(err)
	}
	results, inputs, err := runGroup(context.Background(), mods)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outcomes(plain), outcomes(results)); diff != "" {
		t.Errorf("outcomes instrumented (-as written +instrumented):\n%s", diff)
	}
	if o := outcomes(results); o["test_failing"] != "fail" || o["test_erroring"] == "pass" || o["test_undefined_value"] == "" {
		t.Errorf("outcomes %v: the failing tests must still fail", o)
	}
	got := map[string][]string{}
	for i, r := range results {
		for _, in := range inputs[i] {
			b, err := json.Marshal(ast.MustJSON(in.input))
			if err != nil {
				t.Fatal(err)
			}
			got[r.Name] = append(got[r.Name], strconv.Itoa(in.row)+" "+string(b))
		}
	}
	want := map[string][]string{
		"test_whole":         {`12 {"a":1}`},
		"test_part":          {`16 {"workload":{"b":2}}`},
		"test_layers":        {`20 {"workload":{"name":"b","x":1}}`},
		"test_helper":        {`6 {"c":3}`},
		"test_every":         {`29 {"k":1}`, `29 {"k":2}`},
		"test_comprehension": {`34 {"k":1}`},
		"test_negated":       {`38 {"n":1}`},
		"test_head_ref":      {`9 {"head":1}`},
		"test_twice":         {`46 {"a":1}`, `47 {"a":1}`},
		"test_failing":       {`55 {"f":1}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inputs by test (-want +got):\n%s\nnames: %v", diff, slices.Sorted(maps.Keys(got)))
	}
}

// A test module may not name modelgate's own builtins.
func TestInstrumentTestsRefusesInternalNames(t *testing.T) {
	mod := ast.MustParseModuleWithOpts("package x_test\n\ntest_x if modelgate_internal.capture(1, {})\n",
		ast.ParserOptions{RegoVersion: ast.RegoV1})
	err := instrumentTests(mod)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want a *CompileError", err)
	}
	want := []Problem{{Code: ast.TypeErr, Row: 3, Col: 11,
		Message: "undefined ref modelgate_internal.capture: modelgate_internal is modelgate's own"}}
	if diff := cmp.Diff(want, ce.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
