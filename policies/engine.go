package policies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// DefaultTimeout bounds the evaluation of all policies for one review when
// Options.Timeout is not set; it is well inside the webhook's timeout.
const DefaultTimeout = 2 * time.Second

// Observer is told the outcome of every policy evaluated. decision is one
// of "allow", "deny", "warn", "dryrun" or "error" (see Result.Decision).
// The webhook counts these in Prometheus.
type Observer interface {
	Evaluated(policy, decision string, d time.Duration)
}

// Options configure an Engine.
type Options struct {
	// Timeout bounds the evaluation of all policies for one review;
	// DefaultTimeout when zero or negative. Each policy that applies gets
	// an equal share of the time left when its turn comes, and fails with
	// an error wrapping context.DeadlineExceeded when it runs out of it;
	// the policies after it still run.
	Timeout time.Duration
	// Observer, if set, is told every policy's outcome.
	Observer Observer
}

// Review is what the policies judge: one admitted object.
type Review struct {
	// Kind, Namespace and NamespaceLabels select the policies (see Match).
	Kind, Namespace string
	NamespaceLabels map[string]string
	// Workload is the normalized view, input.workload, already converted
	// once for every policy; nil is null. View, when set, is used instead.
	Workload ast.Value
	// Set, when not nil, is the Set to evaluate instead of the engine's
	// current one: the Set the caller decided what to decode by.
	Set *Set
	// View builds input.workload once per review with only the top-level
	// keys some policy of the Set may read (see Compiled.ReadsWorkloadKey):
	// a key no policy names costs nothing, and no policy can tell it is
	// absent.
	View View
	// Object and OldObject are the raw objects as JSON; nil or empty is
	// null. They are converted, once per review, only when a policy that
	// applies may read them.
	Object, OldObject []byte
}

// View is a workload view that can build its value partially.
type View interface {
	// ValueOf returns the value with the top-level keys for which read
	// reports true.
	ValueOf(read func(key string) bool) ast.Value
}

// Engine evaluates a Set of policies. The Set is swapped atomically, so a
// review sees the old set or the new one, never a mix. Engine is safe for
// concurrent use.
type Engine struct {
	set      atomic.Pointer[Set]
	timeout  time.Duration
	timedOut error
	observer Observer
}

// NewEngine returns an Engine with an empty Set.
func NewEngine(o Options) *Engine {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	e := &Engine{
		timeout:  o.Timeout,
		timedOut: fmt.Errorf("timed out after %s: %w", o.Timeout, context.DeadlineExceeded),
		observer: o.Observer,
	}
	e.set.Store(NewSet())
	return e
}

// Swap makes s the Set evaluated by later reviews; nil is an empty Set.
func (e *Engine) Swap(s *Set) {
	if s == nil {
		s = NewSet()
	}
	e.set.Store(s)
}

// Set returns the current Set.
func (e *Engine) Set() *Set { return e.set.Load() }

// Evaluate runs every policy of the current Set that matches the review,
// under the engine's deadline, and returns their results by policy name.
func (e *Engine) Evaluate(ctx context.Context, r Review) Decision {
	set := r.Set
	if set == nil {
		set = e.set.Load()
	}
	deadline := time.Now().Add(e.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	n := 0
	for _, c := range set.all() {
		if c.match.matches(r.Kind, r.Namespace, r.NamespaceLabels) {
			n++
		}
	}
	if n == 0 {
		return Decision{}
	}
	// One cancel flag per policy, raised by its own timer when its share
	// runs out, or by the review's context when that ends: a timer and no
	// goroutine per policy, instead of a context with a deadline and a
	// callback each.
	var current atomic.Pointer[topdown.Cancel]
	stop := context.AfterFunc(ctx, func() {
		if h := current.Load(); h != nil {
			(*h).Cancel()
		}
	})
	defer stop()
	if r.View != nil {
		r.Workload = r.View.ValueOf(set.reads.has)
	}
	in := newInputs(r)
	d := Decision{Results: make([]Result, 0, n)}
	for _, c := range set.all() {
		if !c.match.matches(r.Kind, r.Namespace, r.NamespaceLabels) {
			continue
		}
		// Each policy gets an equal share of what is left: one that
		// finishes early leaves its time to the next, and a slow one runs
		// out of its own share, never of the policies after it.
		share := time.Until(deadline) / time.Duration(n)
		n--
		res := e.evaluate(ctx, share, &current, c, in)
		if e.observer != nil {
			e.observer.Evaluated(c.name, res.Decision(), res.Duration)
		}
		d.Results = append(d.Results, res)
	}
	return d
}

// errPanic marks an evaluation that panicked.
var errPanic = errors.New("panic during evaluation")

var (
	workloadKey   = ast.StringTerm("workload")
	objectKey     = ast.StringTerm("object")
	oldObjectKey  = ast.StringTerm("oldObject")
	parametersKey = ast.StringTerm("parameters")
	nullTerm      = ast.NullTerm()
)

func (e *Engine) evaluate(ctx context.Context, share time.Duration, current *atomic.Pointer[topdown.Cancel], c *Compiled, in *inputs) (res Result) {
	res = Result{Policy: c.name, Source: c.source, Action: c.action, FailurePolicy: c.failure}
	start := time.Now()
	defer func() {
		// A panic in OPA or a builtin fails this policy, not the webhook.
		if p := recover(); p != nil {
			res = Result{Policy: c.name, Source: c.source, Action: c.action, FailurePolicy: c.failure,
				Err: fmt.Errorf("%w: %v", errPanic, p)}
		}
		res.Duration = time.Since(start)
	}()
	if ctx.Err() != nil {
		res.Err = context.Cause(ctx)
		return res
	}
	if share <= 0 {
		res.Err = e.timedOut
		return res
	}
	// A cancel flag OPA checks as it evaluates, raised when the policy's
	// share or the review's context runs out.
	halt := topdown.NewCancel()
	current.Store(&halt)
	defer current.Store(nil)
	if ctx.Err() != nil { // ended before the flag was published
		halt.Cancel()
	}
	var outOfShare atomic.Bool
	timer := time.AfterFunc(share, func() {
		outOfShare.Store(true)
		halt.Cancel()
	})
	defer timer.Stop()
	// A policy that provably never reads the raw objects gets null, so
	// they are converted only for those that may.
	obj, old := nullTerm, nullTerm
	if c.needsObjects {
		var err error
		if obj, old, err = in.objects(); err != nil {
			res.Err = err
			return res
		}
	}
	input := ast.NewObject(
		[2]*ast.Term{workloadKey, in.workload},
		[2]*ast.Term{objectKey, obj},
		[2]*ast.Term{oldObjectKey, old},
		[2]*ast.Term{parametersKey, c.params},
	)
	rs, err := c.query.Eval(ctx,
		rego.EvalParsedInput(input),
		rego.EvalExternalCancel(halt),
		rego.EvalMetrics(metrics.NoOp()),
	)
	switch {
	case err != nil && topdown.IsCancel(err) && ctx.Err() != nil:
		res.Err = context.Cause(ctx)
		return res
	case err != nil && topdown.IsCancel(err) && outOfShare.Load():
		res.Err = fmt.Errorf("timed out: used up its share of the %s the policies have per review: %w",
			e.timeout, context.DeadlineExceeded)
		return res
	case err != nil:
		res.Err = err
		return res
	case len(rs) != 1 || len(rs[0].Expressions) != len(c.rules):
		res.Err = fmt.Errorf("query gave %d results, want 1", len(rs))
		return res
	}
	for i, rule := range c.rules {
		t, _ := rs[0].Expressions[i].Value.(*ast.Term)
		vs, err := violations(rule, t)
		if err != nil {
			res.Err = err
			return res
		}
		if rule == "deny" {
			res.Deny = vs
		} else {
			res.Warn = vs
		}
	}
	return res
}

// inputs are a review's input values, each converted at most once and
// shared by every policy.
type inputs struct {
	workload  *ast.Term
	raw       [2][]byte
	converted bool
	values    [2]*ast.Term
	err       error
}

func newInputs(r Review) *inputs {
	in := &inputs{workload: nullTerm, raw: [2][]byte{r.Object, r.OldObject}}
	if r.Workload != nil {
		in.workload = ast.NewTerm(r.Workload)
	}
	return in
}

// objects returns input.object and input.oldObject, converting them from
// JSON on first use. Policies run one after another, so no lock is needed.
func (in *inputs) objects() (obj, old *ast.Term, err error) {
	if !in.converted {
		in.converted = true
		for i, name := range []string{"object", "oldObject"} {
			in.values[i] = nullTerm
			if len(bytes.TrimSpace(in.raw[i])) == 0 {
				continue
			}
			v, err := ast.ValueFromReader(bytes.NewReader(in.raw[i]))
			if err != nil {
				in.err = fmt.Errorf("decoding input.%s: %w", name, err)
				break
			}
			in.values[i] = ast.NewTerm(v)
		}
	}
	return in.values[0], in.values[1], in.err
}
