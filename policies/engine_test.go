package policies

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Modules used by the engine tests; each denies or warns unconditionally
// unless stated, so the cases are about the engine, not Rego.
var (
	denyAB = module("package a", "", `deny contains "b second" if true`, `deny contains "a first" if true`,
		`warn contains "w" if true`)
	warnOnly   = module("package w", "", `warn contains "careful" if true`)
	allowAll   = module("package ok", "", `deny contains "never" if false`)
	objectMsgs = module("package gpus", "",
		`deny contains {"msg": "too many GPUs", "details": {"gpus": input.workload.gpu.count, "max": input.parameters.max}} if {`,
		"  input.workload.gpu.count > input.parameters.max", "}")
	numberMsg   = module("package bad", "", "deny contains 42 if true")
	objNoMsg    = module("package bad", "", `deny contains {"message": "typo"} if true`)
	objBadMsg   = module("package bad", "", `deny contains {"msg": 1} if true`)
	readsObject = module("package replicas", "",
		`deny contains sprintf("replicas %d over %d", [input.object.spec.replicas, input.parameters.max]) if {`,
		"  input.object.spec.replicas > input.parameters.max", "}",
		`warn contains "created" if input.oldObject == null`)
	// slow runs 10^8 iterations with allowed builtins only: a nested
	// comprehension over a ten-element array.
	slow = module("package slow", "", "xs := [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "deny contains msg if {",
		"  n := count([1 | some a in xs; some b in xs; some c in xs; some d in xs; some e in xs; some f in xs; some g in xs; some h in xs])",
		`  msg := sprintf("%d", [n])`, "}")
)

func TestEvaluate(t *testing.T) {
	deployment := []byte(`{"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3}}`)
	cases := map[string]struct {
		policies     []Policy
		review       Review
		timeout      time.Duration
		wantDenials  []string
		wantWarnings []string
		wantObserved []observed
		// wantErrIs, if set, must match every result's error.
		wantErrIs error
		// fallsBack is set when the combined query fails as a whole, so
		// the policies are evaluated again one query each.
		fallsBack bool
	}{
		"deny action": {
			policies:     []Policy{{Name: "a", Module: denyAB}},
			wantDenials:  []string{"[a] a first", "[a] b second"},
			wantWarnings: []string{"[a] w"},
			wantObserved: []observed{{"a", "deny"}},
		},
		"warn action turns denials into warnings": {
			policies:     []Policy{{Name: "a", Module: denyAB, Action: ActionWarn}},
			wantWarnings: []string{"[a] a first", "[a] b second", "[a] w"},
			wantObserved: []observed{{"a", "warn"}},
		},
		"dryrun shows nothing": {
			policies:     []Policy{{Name: "a", Module: denyAB, Action: ActionDryRun}},
			wantObserved: []observed{{"a", "dryrun"}},
		},
		"warn rule only": {
			policies:     []Policy{{Name: "w", Module: warnOnly}},
			wantWarnings: []string{"[w] careful"},
			wantObserved: []observed{{"w", "warn"}},
		},
		"nothing to say": {
			policies:     []Policy{{Name: "ok", Module: allowAll}},
			wantObserved: []observed{{"ok", "allow"}},
		},
		"object messages and parameters": {
			policies:     []Policy{{Name: "gpus", Module: objectMsgs, Parameters: map[string]any{"max": 0}}},
			wantDenials:  []string{"[gpus] too many GPUs"},
			wantObserved: []observed{{"gpus", "deny"}},
		},
		"raw objects": {
			policies:     []Policy{{Name: "replicas", Module: readsObject, Parameters: map[string]any{"max": 2}}},
			review:       Review{Object: deployment},
			wantDenials:  []string{"[replicas] replicas 3 over 2"},
			wantWarnings: []string{"[replicas] created"},
			wantObserved: []observed{{"replicas", "deny"}},
		},
		"raw objects are not decoded when no policy reads them": {
			policies:     []Policy{{Name: "w", Module: warnOnly}},
			review:       Review{Object: []byte("{not json"), OldObject: []byte("{")},
			wantWarnings: []string{"[w] careful"},
			wantObserved: []observed{{"w", "warn"}},
		},
		"undecodable object fails the policy that reads it": {
			policies:     []Policy{{Name: "replicas", Module: readsObject}, {Name: "w", Module: warnOnly}},
			review:       Review{Object: []byte("{not json")},
			wantDenials:  []string{"[replicas] policy evaluation failed: decoding input.object: invalid character 'n' looking for beginning of object key string"},
			wantWarnings: []string{"[w] careful"},
			wantObserved: []observed{{"replicas", "error"}, {"w", "warn"}},
			fallsBack:    true,
		},
		"non-string message is an error": {
			policies:     []Policy{{Name: "bad", Module: numberMsg}},
			wantDenials:  []string{"[bad] policy evaluation failed: deny: message must be a string or an object with a msg, got number 42"},
			wantObserved: []observed{{"bad", "error"}},
		},
		"object without msg is an error": {
			policies:     []Policy{{Name: "bad", Module: objNoMsg}},
			wantDenials:  []string{`[bad] policy evaluation failed: deny: message object has key "message": only msg and details are allowed`},
			wantObserved: []observed{{"bad", "error"}},
		},
		"non-string msg is an error": {
			policies:     []Policy{{Name: "bad", Module: objBadMsg}},
			wantDenials:  []string{"[bad] policy evaluation failed: deny: msg must be a string, got number 1"},
			wantObserved: []observed{{"bad", "error"}},
		},
		"failure policy allow turns the error into a warning": {
			policies:     []Policy{{Name: "bad", Module: numberMsg, FailurePolicy: FailAllow}},
			wantWarnings: []string{"[bad] policy evaluation failed: deny: message must be a string or an object with a msg, got number 42"},
			wantObserved: []observed{{"bad", "error"}},
		},
		"dryrun hides errors": {
			policies:     []Policy{{Name: "bad", Module: numberMsg, Action: ActionDryRun}},
			wantObserved: []observed{{"bad", "error"}},
		},
		// A slow policy runs out of its own share of the budget (half of it
		// with two policies); the policy after it still runs and decides.
		// The budget is long enough for the policy after it to decide on a
		// loaded machine (100ms was not, beside a cluster's compile).
		"deadline": {
			policies: []Policy{{Name: "slow", Module: slow}, {Name: "z-after", Module: warnOnly, FailurePolicy: FailAllow}},
			timeout:  time.Second,
			wantDenials: []string{
				"[slow] policy evaluation failed: timed out: used up its share of the 1s the policies have per review: context deadline exceeded",
			},
			wantWarnings: []string{"[z-after] careful"},
			wantObserved: []observed{{"slow", "error"}, {"z-after", "warn"}},
			fallsBack:    true,
		},
		"results by policy name, messages by text": {
			policies: []Policy{
				{Name: "c", Module: warnOnly},
				{Name: "a", Module: denyAB},
				{Name: "b", Module: denyAB, Action: ActionWarn},
			},
			wantDenials:  []string{"[a] a first", "[a] b second"},
			wantWarnings: []string{"[a] w", "[b] a first", "[b] b second", "[b] w", "[c] careful"},
			wantObserved: []observed{{"a", "deny"}, {"b", "warn"}, {"c", "warn"}},
		},
		"match skips policies": {
			policies: []Policy{
				{Name: "pods-only", Module: warnOnly, Match: Match{Kinds: []string{"Pod"}}},
				{Name: "deployments", Module: warnOnly, Match: Match{Kinds: []string{"Deployment"}}},
			},
			review:       Review{Kind: "Deployment", Namespace: "team-a"},
			wantWarnings: []string{"[deployments] careful"},
			wantObserved: []observed{{"deployments", "warn"}},
		},
	}
	for name, tc := range cases {
		// Every case is evaluated one query per policy, and with the
		// combinable policies in one query: the answers are the same.
		for _, separate := range []bool{true, false} {
			mode := map[bool]string{true: "separate", false: "combined"}[separate]
			t.Run(name+"/"+mode, func(t *testing.T) {
				rec := &recorder{}
				e := NewEngine(Options{Timeout: tc.timeout, Observer: rec, SeparateQueries: separate})
				var cs []*Compiled
				for _, p := range tc.policies {
					cs = append(cs, mustCompile(t, p))
				}
				set := NewSet(cs...)
				e.Swap(set)
				set.Prepare(context.Background())
				r := tc.review
				r.Workload = toValue(t, gpuWorkload())
				d := e.Evaluate(context.Background(), r)
				if diff := cmp.Diff(tc.wantDenials, d.Denials()); diff != "" {
					t.Errorf("Denials() (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.wantWarnings, d.Warnings()); diff != "" {
					t.Errorf("Warnings() (-want +got):\n%s", diff)
				}
				if got, want := d.Allowed(), len(tc.wantDenials) == 0; got != want {
					t.Errorf("Allowed() = %v, want %v", got, want)
				}
				if diff := cmp.Diff(tc.wantObserved, rec.calls); diff != "" {
					t.Errorf("observed (-want +got):\n%s", diff)
				}
				for _, r := range d.Results {
					if tc.wantErrIs != nil && !errors.Is(r.Err, tc.wantErrIs) {
						t.Errorf("%s: Err = %v, want %v", r.Policy, r.Err, tc.wantErrIs)
					}
				}
				combined := 0
				if !separate && !tc.fallsBack && len(tc.wantObserved) > 1 {
					combined = 1
				}
				if got := e.combinedEvals.Load(); got != uint64(combined) {
					t.Errorf("reviews evaluated in one query = %d, want %d", got, combined)
				}
			})
		}
	}
}

func TestEvaluateResults(t *testing.T) {
	e := NewEngine(Options{})
	e.Swap(NewSet(
		mustCompile(t, Policy{Name: "gpus", Source: "test", Module: objectMsgs, Parameters: map[string]any{"max": 0}}),
		mustCompile(t, Policy{Name: "slow", Source: "test", Module: slow, FailurePolicy: FailAllow}),
	))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d := e.Evaluate(ctx, Review{Workload: toValue(t, gpuWorkload())})
	if len(d.Results) != 2 {
		t.Fatalf("got %d results, want 2", len(d.Results))
	}
	// The cancelled context stops every policy; the first still reports it.
	for _, r := range d.Results {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("%s: Err = %v, want context.Canceled", r.Policy, r.Err)
		}
	}

	e.Swap(NewSet(e.Set().all()[0]))
	d = e.Evaluate(context.Background(), Review{Workload: toValue(t, gpuWorkload())})
	if len(d.Results) != 1 {
		t.Fatalf("got %d results, want 1", len(d.Results))
	}
	got := d.Results[0]
	got.Duration = 0
	want := Result{
		Policy: "gpus", Source: "test", Action: ActionDeny, FailurePolicy: FailDeny, Ratchet: true,
		Deny: []Violation{{Msg: "too many GPUs", Details: map[string]any{"gpus": json.Number("1"), "max": json.Number("0")}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Results[0] (-want +got):\n%s", diff)
	}
	if d.Results[0].Duration <= 0 {
		t.Errorf("Results[0].Duration = %v, want > 0", d.Results[0].Duration)
	}
}

func TestMatch(t *testing.T) {
	nlp := map[string]string{"modelgate.io/team": "nlp"}
	cases := map[string]struct {
		match     Match
		kind, ns  string
		nsLabels  map[string]string
		wantMatch bool
	}{
		"empty matches all":          {kind: "Pod", ns: "x", wantMatch: true},
		"kind":                       {match: Match{Kinds: []string{"Pod", "Job"}}, kind: "Job", wantMatch: true},
		"other kind":                 {match: Match{Kinds: []string{"Pod"}}, kind: "Deployment"},
		"namespace":                  {match: Match{Namespaces: []string{"a", "b"}}, ns: "b", wantMatch: true},
		"other namespace":            {match: Match{Namespaces: []string{"a"}}, ns: "b"},
		"excluded":                   {match: Match{ExcludedNamespaces: []string{"kube-system"}}, ns: "kube-system"},
		"excluded wins over listed":  {match: Match{Namespaces: []string{"a"}, ExcludedNamespaces: []string{"a"}}, ns: "a"},
		"not excluded":               {match: Match{ExcludedNamespaces: []string{"kube-system"}}, ns: "a", wantMatch: true},
		"selector":                   {match: Match{NamespaceSelector: &metav1.LabelSelector{MatchLabels: nlp}}, nsLabels: nlp, wantMatch: true},
		"selector, other labels":     {match: Match{NamespaceSelector: &metav1.LabelSelector{MatchLabels: nlp}}, nsLabels: map[string]string{"x": "y"}},
		"selector, no labels":        {match: Match{NamespaceSelector: &metav1.LabelSelector{MatchLabels: nlp}}},
		"empty selector matches all": {match: Match{NamespaceSelector: &metav1.LabelSelector{}}, wantMatch: true},
		"selector expression": {
			match: Match{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "modelgate.io/team", Operator: metav1.LabelSelectorOpExists},
			}}},
			nsLabels: nlp, wantMatch: true,
		},
		"every field": {
			match: Match{Kinds: []string{"Deployment"}, Namespaces: []string{"team-a"},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: nlp}},
			kind: "Deployment", ns: "team-a", nsLabels: nlp, wantMatch: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustCompile(t, Policy{Name: "p", Module: warnOnly, Match: tc.match})
			if got := c.Matches(tc.kind, tc.ns, tc.nsLabels); got != tc.wantMatch {
				t.Errorf("Matches(%q, %q, %v) = %v, want %v", tc.kind, tc.ns, tc.nsLabels, got, tc.wantMatch)
			}
		})
	}
}

// TestEvaluateStopsWithTheReview: a review whose context ends (the API
// server gave up) stops the policy running at once, with the context's
// cause, and the policies after it are not run; the engine's own budget
// is far away.
func TestEvaluateStopsWithTheReview(t *testing.T) {
	e := NewEngine(Options{Timeout: time.Minute})
	e.Swap(NewSet(mustCompile(t, Policy{Name: "slow", Module: slow}), mustCompile(t, Policy{Name: "z-after", Module: warnOnly})))
	gone := errors.New("the API server gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(gone) })
	start := time.Now()
	d := e.Evaluate(ctx, Review{Workload: toValue(t, gpuWorkload())})
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Evaluate took %s after its review ended", took)
	}
	if len(d.Results) != 2 {
		t.Fatalf("%d results, want 2", len(d.Results))
	}
	for _, r := range d.Results {
		if !errors.Is(r.Err, gone) {
			t.Errorf("%s: Err = %v, want the review's cause", r.Policy, r.Err)
		}
	}
}

// keysView is a View over a full value that remembers what it was asked.
type keysView struct {
	full  ast.Object
	asked []string
}

func (v *keysView) ValueOf(read func(string) bool) ast.Value {
	out := ast.NewObject()
	v.full.Foreach(func(k, val *ast.Term) {
		if key := string(k.Value.(ast.String)); read(key) {
			v.asked = append(v.asked, key)
			out.Insert(k, val)
		}
	})
	return out
}

// AppendKey appends the read keys' canonical text.
func (v *keysView) AppendKey(buf []byte, read func(string) bool) []byte {
	b, _ := v.ValueOf(read).(interface{ AppendText([]byte) ([]byte, error) }).AppendText(buf)
	return b
}

// TestEvaluateView: the view is asked only for the keys the set's
// policies name, and decides as the whole view does, a policy that reads
// the whole view included.
func TestEvaluateView(t *testing.T) {
	kind := mustCompile(t, Policy{Name: "kind", Module: module("package kind", "", `deny contains "deployment" if input.workload.kind == "Deployment"`)})
	labels := mustCompile(t, Policy{Name: "labels", Module: module("package labels", "", `warn contains "no labels" if count(input.workload.labels) == 0`)})
	keys := mustCompile(t, Policy{Name: "keys", Module: module("package keys", "", `warn contains msg if { msg := sprintf("%d keys", [count(object.keys(input.workload))]) }`)})
	full := toValue(t, gpuWorkload()).(ast.Object)
	for name, tc := range map[string]struct {
		set   []*Compiled
		asked []string
	}{
		"named keys":     {set: []*Compiled{kind, labels}, asked: []string{"kind", "labels"}},
		"the whole view": {set: []*Compiled{kind, keys}},
	} {
		t.Run(name, func(t *testing.T) {
			e := NewEngine(Options{})
			e.Swap(NewSet(tc.set...))
			want := e.Evaluate(context.Background(), Review{Kind: "Deployment", Workload: full})
			v := &keysView{full: full}
			got := e.Evaluate(context.Background(), Review{Kind: "Deployment", View: v})
			if diff := cmp.Diff(want.Denials(), got.Denials()); diff != "" {
				t.Errorf("denials (-whole view +view):\n%s", diff)
			}
			if diff := cmp.Diff(want.Warnings(), got.Warnings()); diff != "" {
				t.Errorf("warnings (-whole view +view):\n%s", diff)
			}
			if len(want.Denials())+len(want.Warnings()) == 0 {
				t.Fatal("the policies said nothing: the comparison proves nothing")
			}
			wantAsked := tc.asked
			if wantAsked == nil {
				for _, k := range full.Keys() {
					wantAsked = append(wantAsked, string(k.Value.(ast.String)))
				}
			}
			slices.Sort(v.asked)
			slices.Sort(wantAsked)
			if diff := cmp.Diff(wantAsked, v.asked); diff != "" {
				t.Errorf("keys asked (-want +got):\n%s", diff)
			}
		})
	}
}
