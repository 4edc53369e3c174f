package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The admission check of RunTests: every input a test gave its policy
// (testcapture.go) is judged twice, by OPA as the test judged it (the
// plain path: the module alone, as written, on the whole input) and by the
// engine as the cluster judges it: the policy compiled with the input's
// parameters in a Set with the run's other policies (so they share a
// combined query), the workload given as a View (so the policy sees only
// the keys its reading names), and the decision cache on (so a guarded
// read of the name is proven or not). The review is evaluated three
// times: once, once more (answered by the cache) and with
// input.workload.name changed (answered by the cache when no policy read
// the name). Every answer must be the plain path's on the same input.

const (
	// checkTimeout bounds one review of the check: generous, as the test
	// is about what the policies answer, not the machine's speed.
	checkTimeout = 30 * time.Second
	// checkCacheBytes bounds each Set's decision cache.
	checkCacheBytes = 1 << 20
)

// checkedPolicy is one policy of the run.
type checkedPolicy struct {
	policy Policy
	// compiled has no parameters; plain is compiled on first use.
	compiled *Compiled
	plain    *Plain
	// params are the distinct parameters its tests give it (by their
	// text, "{}" for none), and variants the policy compiled with each.
	params   map[string]int
	variants []*Compiled
}

// admissionCheck judges the inputs of a run's tests on both paths.
type admissionCheck struct {
	policies map[string]*checkedPolicy
	// view makes the View of input.workload: NewObjectView. The tests
	// replace it with a wrong one to prove the check fails.
	view func(ast.Object) View
	// engines evaluate the Sets: engines[i] holds the i-th parameters of
	// every policy (its first for a policy that has fewer), so each Set
	// serves the tests of every policy, and there are as many Sets as the
	// most parameters one policy has, not one per policy and parameters.
	engines []*Engine
}

func newAdmissionCheck(view func(ast.Object) View) *admissionCheck {
	if view == nil {
		view = func(o ast.Object) View { return NewObjectView(o) }
	}
	return &admissionCheck{policies: map[string]*checkedPolicy{}, view: view}
}

// add makes a compiled policy part of the run.
func (a *admissionCheck) add(p Policy, c *Compiled) {
	a.policies[p.Name] = &checkedPolicy{policy: p, compiled: c, params: map[string]int{}}
}

// judgeable returns the input as an object when the cluster can send it:
// an object whose parameters, if any, are an object.
func judgeable(in captured) (ast.Object, bool) {
	obj, ok := in.input.(ast.Object)
	if !ok {
		return nil, false
	}
	if params := obj.Get(parametersKey); params != nil {
		if _, ok := params.Value.(ast.Object); !ok {
			return nil, false
		}
	}
	return obj, true
}

// paramsKey is the text of an input's parameters, "{}" when it has none.
func paramsKey(in ast.Object) (string, *ast.Term) {
	params := in.Get(parametersKey)
	if params == nil {
		return "{}", nil
	}
	return params.String(), params
}

// plan compiles the policy named name with the parameters of the inputs
// its tests gave it. Every input is planned before the first check.
func (a *admissionCheck) plan(ctx context.Context, name string, inputs []captured) error {
	p := a.policies[name]
	if p == nil {
		return nil
	}
	for _, captured := range inputs {
		in, ok := judgeable(captured)
		if !ok {
			continue
		}
		key, params := paramsKey(in)
		if _, ok := p.params[key]; ok {
			continue
		}
		c := p.compiled
		if params != nil && params.Value.(ast.Object).Len() > 0 {
			v, err := ast.JSON(params.Value)
			if err != nil {
				return fmt.Errorf("parameters %v: %w", params, err)
			}
			withParams := p.policy
			withParams.Parameters, _ = v.(map[string]any)
			if c, err = Compile(ctx, withParams); err != nil {
				return err
			}
		}
		p.params[key] = len(p.variants)
		p.variants = append(p.variants, c)
	}
	return nil
}

// engine returns the engine of the Set that holds the policy with the
// parameters of key, making the Sets on first use.
func (a *admissionCheck) engine(ctx context.Context, p *checkedPolicy, key string) *Engine {
	if a.engines == nil {
		n := 1
		for _, q := range a.policies {
			n = max(n, len(q.variants))
		}
		for i := range n {
			var members []*Compiled
			for _, q := range a.policies {
				switch {
				case i < len(q.variants):
					members = append(members, q.variants[i])
				case len(q.variants) > 0:
					members = append(members, q.variants[0])
				default:
					members = append(members, q.compiled)
				}
			}
			set := NewSet(members...)
			set.Prepare(ctx)
			e := NewEngine(Options{Timeout: checkTimeout, Cache: NewDecisionCache(checkCacheBytes)})
			e.Swap(set)
			a.engines = append(a.engines, e)
		}
	}
	return a.engines[p.params[key]]
}

// check judges the inputs a test gave the policy named name (planned),
// and returns those answered otherwise. Inputs the cluster cannot send
// (not an object, or parameters that are not an object) are left out.
func (a *admissionCheck) check(ctx context.Context, name string, inputs []captured) ([]Difference, error) {
	p := a.policies[name]
	if p == nil {
		return nil, nil
	}
	if p.plain == nil {
		plain, err := CompilePlain(ctx, p.policy)
		if err != nil {
			return nil, err
		}
		p.plain = plain
	}
	var out []Difference
	for _, in := range inputs {
		obj, ok := judgeable(in)
		if !ok {
			continue
		}
		key, _ := paramsKey(obj)
		if d, ok := a.judge(ctx, a.engine(ctx, p, key), p, obj); !ok {
			d.Row, d.Input, d.Note = in.row, abbreviate(obj), inputNote(obj)
			out = append(out, d)
		}
	}
	return out, nil
}

// testRun is what a test gave: the name of the policy it tests ("" for a
// test file alone) and the inputs it gave.
type testRun struct {
	policy string
	inputs []captured
}

// judgeAll judges the inputs of every test that held (runs[i] is
// results[i]'s): one that failed fails already. A test whose inputs are
// answered otherwise fails with the Differences.
func (a *admissionCheck) judgeAll(ctx context.Context, results []TestResult, runs []testRun) {
	judged := func(i int) bool {
		return runs[i].policy != "" && results[i].Outcome == "pass" && len(runs[i].inputs) > 0
	}
	fail := func(r *TestResult, err error) {
		r.Outcome, r.Err = "error", fmt.Errorf("judging its inputs as the cluster does: %w", err)
	}
	// Every policy is compiled with all its tests' parameters before the
	// first Set is made (see engines).
	for i := range runs {
		if judged(i) {
			if err := a.plan(ctx, runs[i].policy, runs[i].inputs); err != nil {
				fail(&results[i], err)
			}
		}
	}
	for i := range runs {
		if !judged(i) {
			continue
		}
		diffs, err := a.check(ctx, runs[i].policy, runs[i].inputs)
		switch {
		case err != nil:
			fail(&results[i], err)
		case len(diffs) > 0:
			results[i].Outcome, results[i].Differences = "fail", diffs
		}
	}
}

// judge compares the answers to one input, and to its renamed copy.
func (a *admissionCheck) judge(ctx context.Context, e *Engine, p *checkedPolicy, in ast.Object) (Difference, bool) {
	r, ok := a.review(in, p)
	if !ok {
		// An input with no JSON form (a set in input.object) cannot reach
		// the cluster.
		return Difference{}, true
	}
	want := p.plain.Evaluate(ctx, in)
	for _, step := range []string{"", "cached"} {
		if got := resultOf(e.Evaluate(ctx, r), p.policy.Name); !sameAnswer(want, got) {
			return Difference{Step: step, OPA: answer(want), Admission: answer(got)}, false
		}
	}
	renamed, name := rename(in)
	if renamed == nil {
		return Difference{}, true
	}
	r, _ = a.review(renamed, p) // the same objects
	want = p.plain.Evaluate(ctx, renamed)
	if got := resultOf(e.Evaluate(ctx, r), p.policy.Name); !sameAnswer(want, got) {
		return Difference{Step: "renamed", Name: name, OPA: answer(want), Admission: answer(got)}, false
	}
	return Difference{}, true
}

func sameAnswer(a, b Result) bool {
	same, _ := SameMessages(a, b)
	return same
}

// review makes the review the cluster would judge for an input: the kind,
// namespace and namespace labels from input.workload (they select the
// policies and key the cache), input.workload as a View, and the raw
// objects as JSON; false when they have no JSON form. A test judges its
// policy where it applies: a kind the policy's zero Match does not select
// (a ResourceClaim) is given as none.
func (a *admissionCheck) review(in ast.Object, p *checkedPolicy) (Review, bool) {
	var r Review
	if w := in.Get(workloadKey); w != nil {
		if obj, ok := w.Value.(ast.Object); ok {
			r.View = a.view(obj)
			r.Kind = stringAt(obj, "kind")
			r.Namespace = stringAt(obj, "namespace")
			if labels, ok := valueAt(obj, "namespaceLabels").(ast.Object); ok {
				r.NamespaceLabels = map[string]string{}
				labels.Foreach(func(k, v *ast.Term) {
					ks, kok := k.Value.(ast.String)
					vs, vok := v.Value.(ast.String)
					if kok && vok {
						r.NamespaceLabels[string(ks)] = string(vs)
					}
				})
			}
		} else {
			r.Workload = w.Value
		}
	}
	if !p.compiled.Matches(r.Kind, r.Namespace, r.NamespaceLabels) {
		r.Kind = ""
	}
	var err, oldErr error
	r.Object, err = rawJSON(in.Get(objectKey))
	r.OldObject, oldErr = rawJSON(in.Get(oldObjectKey))
	return r, err == nil && oldErr == nil
}

// valueAt returns the value at key of obj, nil when there is none.
func valueAt(obj ast.Object, key string) ast.Value {
	if t := obj.Get(ast.StringTerm(key)); t != nil {
		return t.Value
	}
	return nil
}

// stringAt returns the string at key of obj, "" when it is not one.
func stringAt(obj ast.Object, key string) string {
	s, _ := valueAt(obj, key).(ast.String)
	return string(s)
}

// rawJSON returns t as JSON; nil when t is nil.
func rawJSON(t *ast.Term) ([]byte, error) {
	if t == nil {
		return nil, nil
	}
	v, err := ast.JSON(t.Value)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// rename returns in with input.workload.name changed, and the new name;
// nil when input.workload is not an object.
func rename(in ast.Object) (ast.Object, string) {
	w, ok := valueAt(in, "workload").(ast.Object)
	if !ok {
		return nil, ""
	}
	name := "renamed"
	if old := stringAt(w, "name"); old != "" {
		name = old + "-renamed"
	}
	nameKey := ast.StringTerm("name")
	w2 := ast.NewObject([2]*ast.Term{nameKey, ast.StringTerm(name)})
	w.Foreach(func(k, v *ast.Term) {
		if !k.Equal(nameKey) {
			w2.Insert(k, v)
		}
	})
	out := ast.NewObject([2]*ast.Term{workloadKey, ast.NewTerm(w2)})
	in.Foreach(func(k, v *ast.Term) {
		if !k.Equal(workloadKey) {
			out.Insert(k, v)
		}
	})
	return out, name
}

// resultOf returns the result of the named policy in d.
func resultOf(d Decision, name string) Result {
	for _, r := range d.Results {
		if r.Policy == name {
			return r
		}
	}
	return Result{Policy: name, Err: fmt.Errorf("policy %s was not evaluated", name)}
}
