package policies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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

// Observer is told the outcome of every policy evaluated, and of every
// policy whose result the DecisionCache gave. decision is one of "allow",
// "deny", "warn", "dryrun" or "error" (see Result.Decision). The webhook
// counts these in Prometheus.
type Observer interface {
	Evaluated(policy, decision string, d time.Duration)
	Cached(policy, decision string)
}

// LoadObserver is what an Observer also implements to be told the names
// of the policies of every Set the engine is given (the webhook makes
// their metrics' series exist before their first evaluation).
type LoadObserver interface {
	Loaded(names []string)
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
	// SeparateQueries evaluates every policy in a query of its own, as
	// when the policies that apply cannot be combined (see Set.Prepare):
	// the baseline of the benchmarks.
	SeparateQueries bool
	// Cache, if set, answers a review that is the same as an earlier one
	// in everything the policies can read with the earlier decision,
	// without evaluating (see DecisionCache). The Observer is told of the
	// results it gives through Cached.
	Cache *DecisionCache
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
	// Raw, when set, is this review as its bytes give it: a decision the
	// cache gives or keeps for the review is kept under Raw's key too, for
	// Recall to find the next time without decoding.
	Raw *RawReview
}

// View is a workload view that can build its value partially.
type View interface {
	// ValueOf returns the value with the top-level keys for which read
	// reports true.
	ValueOf(read func(key string) bool) ast.Value
	// AppendKey appends to buf an encoding of those keys from which
	// ValueOf's value is known: two views that append the same bytes have
	// the same value. The DecisionCache keys reviews by it.
	AppendKey(buf []byte, read func(key string) bool) []byte
}

// Engine evaluates a Set of policies. The Set is swapped atomically, so a
// review sees the old set or the new one, never a mix. Engine is safe for
// concurrent use.
type Engine struct {
	set atomic.Pointer[Set]
	// exceptions are the WorkloadPolicyExceptions in force, applied by
	// the caller (Exceptions.Except) after evaluation.
	exceptions atomic.Pointer[Exceptions]
	// preparing is set while a goroutine prepares the latest Set.
	preparing atomic.Bool
	timeout   time.Duration
	timedOut  error
	observer  Observer
	separate  bool
	cache     *DecisionCache
	// combinedEvals counts the reviews whose combinable policies were
	// evaluated in one query.
	combinedEvals atomic.Uint64
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
		separate: o.SeparateQueries,
		cache:    o.Cache,
	}
	e.set.Store(NewSet())
	return e
}

// Swap makes s the Set evaluated by later reviews; nil is an empty Set.
// It starts preparing s in the background (see Set.Prepare): until that is
// done, reviews evaluate each policy in a query of its own.
func (e *Engine) Swap(s *Set) {
	if s == nil {
		s = NewSet()
	}
	e.set.Store(s)
	if o, ok := e.observer.(LoadObserver); ok {
		o.Loaded(s.Names())
	}
	if !e.separate && s.Len() > 1 && e.preparing.CompareAndSwap(false, true) {
		go e.prepareLatest()
	}
}

// prepareLatest prepares the current Set, and again while Swap has
// replaced it meanwhile: one preparation at a time, of the latest Set, so
// policies loaded one by one at start cost one preparation, not one each.
func (e *Engine) prepareLatest() {
	for {
		s := e.set.Load()
		s.Prepare(context.Background())
		e.preparing.Store(false)
		if e.set.Load() == s || !e.preparing.CompareAndSwap(false, true) {
			return
		}
	}
}

// CombinedReviews returns how many reviews had their combinable policies
// evaluated in one query (see Set.Prepare).
func (e *Engine) CombinedReviews() uint64 { return e.combinedEvals.Load() }

// Timeout is the bound on evaluating every policy for one review.
func (e *Engine) Timeout() time.Duration { return e.timeout }

// SetExceptions makes x the exceptions later reviews apply; nil is none.
func (e *Engine) SetExceptions(x *Exceptions) { e.exceptions.Store(x) }

// Exceptions returns the current exceptions, nil when there are none.
func (e *Engine) Exceptions() *Exceptions { return e.exceptions.Load() }

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

	matched := make([]int, 0, set.Len())
	for i, c := range set.all() {
		if c.match.matches(r.Kind, r.Namespace, r.NamespaceLabels) {
			matched = append(matched, i)
		}
	}
	if len(matched) == 0 {
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
	// A review is cached when no policy that applies may read the raw
	// objects, and only under the engine's own Set (not a ratcheting subset of it, which
	// would drop the entries of the whole one).
	var key cacheKey
	var guarded *guardedReads
	cached := e.cache != nil && set == e.set.Load() &&
		!slices.ContainsFunc(matched, func(i int) bool { return !set.policies[i].cacheable() })
	if cached {
		key, cached = reviewKey(&r, set)
	}
	if cached {
		if d, readGuarded, ok := e.cache.get(set, key); ok {
			if e.observer != nil {
				for k := range d.Results {
					e.observer.Cached(d.Results[k].Policy, d.Results[k].Decision())
				}
			}
			if r.Raw != nil {
				e.cache.put(set, d, readGuarded, r.Raw.key(set))
			}
			return d
		}
		if len(set.guarded) > 0 {
			guarded = &guardedReads{}
			ctx = withGuardedReads(ctx, guarded)
		}
	}
	if r.View != nil {
		r.Workload = r.View.ValueOf(set.reads.has)
	}
	in := newInputs(r)
	results := make([]Result, len(matched))
	done := make([]bool, len(matched))
	left := len(matched)
	// The combinable policies that apply go first, together in one query
	// when it is prepared, with half their share of the time: when it
	// fails they are evaluated again one by one with what is left.
	var members []int
	if !e.separate {
		members = set.combinableMembers(func(i int) bool { _, ok := slices.BinarySearch(matched, i); return ok })
	}
	if len(members) > 1 {
		if q := set.combinedQuery(members); q != nil {
			budget := time.Until(deadline) * time.Duration(len(members)) / time.Duration(2*len(matched))
			if out, ok := e.evaluateCombined(ctx, budget, &current, set, q, in); ok {
				for k, i := range members {
					j, _ := slices.BinarySearch(matched, i)
					results[j], done[j] = out[k], true
				}
				left -= len(members)
				e.combinedEvals.Add(1)
			}
		}
	}
	for j, i := range matched {
		if done[j] {
			continue
		}
		// Each policy gets an equal share of what is left: one that
		// finishes early leaves its time to the next, and a slow one runs
		// out of its own share, never of the policies after it.
		share := time.Until(deadline) / time.Duration(left)
		left--
		results[j] = e.evaluate(ctx, share, &current, set.policies[i], in)
	}
	if e.observer != nil {
		for k := range results {
			e.observer.Evaluated(results[k].Policy, results[k].Decision(), results[k].Duration)
		}
	}
	d := Decision{Results: results}
	if cached && d.cacheable() {
		keys := []cacheKey{key}
		if r.Raw != nil {
			keys = append(keys, r.Raw.key(set))
		}
		e.cache.put(set, d, guarded != nil && guarded.read, keys...)
	}
	return d
}

// cacheable reports whether the policy's decisions may be cached: it
// provably reads neither raw object. A policy whose reads of the view the
// analysis could not name gets the whole view, and its decisions are keyed
// by every field of it (View.AppendKey of every key), with no guard: a key
// that relies on no reading of the module.
func (c *Compiled) cacheable() bool { return !c.needsObjects }

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
	res = Result{Policy: c.name, Source: c.source, Action: c.action, FailurePolicy: c.failure, Ratchet: c.ratchet}
	start := time.Now()
	defer func() {
		// A panic in OPA or a builtin fails this policy, not the webhook.
		if p := recover(); p != nil {
			res = Result{Policy: c.name, Source: c.source, Action: c.action, FailurePolicy: c.failure, Ratchet: c.ratchet,
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
	halt, outOfShare, disarm := arm(ctx, share, current)
	defer disarm()
	rs, err := in.eval(ctx, c.query, c.needsObjects, c.params, halt)
	switch {
	case errors.As(err, new(*inputError)):
		res.Err = err
		return res
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
	c.read(&res, rs[0].Expressions)
	return res
}

// arm returns a cancel flag OPA checks as it evaluates, raised when share
// runs out (then outOfShare is true) or the review's context ends, and
// the function that disarms it.
func arm(ctx context.Context, share time.Duration, current *atomic.Pointer[topdown.Cancel]) (halt topdown.Cancel, outOfShare *atomic.Bool, disarm func()) {
	halt = topdown.NewCancel()
	current.Store(&halt)
	if ctx.Err() != nil { // ended before the flag was published
		halt.Cancel()
	}
	outOfShare = new(atomic.Bool)
	timer := time.AfterFunc(share, func() {
		outOfShare.Store(true)
		halt.Cancel()
	})
	return halt, outOfShare, func() {
		timer.Stop()
		current.Store(nil)
	}
}

// read sets res's messages from the values of c's rules, in c.rules order.
func (c *Compiled) read(res *Result, values []*rego.ExpressionValue) {
	for i, rule := range c.rules {
		t, _ := values[i].Value.(*ast.Term)
		vs, err := violations(rule, t)
		if err != nil {
			res.Deny, res.Warn, res.Err = nil, nil, err
			return
		}
		if rule == "deny" {
			res.Deny = vs
		} else {
			res.Warn = vs
		}
	}
}

// evaluateCombined evaluates the policies of q in one query within budget,
// and returns their results in q.members order. It reports false when the
// query failed as a whole (an error, a panic, the budget or the review's
// context running out): the caller then evaluates them one by one. Each
// result is given an equal part of the query's time.
func (e *Engine) evaluateCombined(ctx context.Context, budget time.Duration, current *atomic.Pointer[topdown.Cancel], set *Set, q *combinedQuery, in *inputs) (out []Result, ok bool) {
	if ctx.Err() != nil || budget <= 0 {
		return nil, false
	}
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			out, ok = nil, false
		}
	}()
	halt, _, disarm := arm(ctx, budget, current)
	defer disarm()
	rs, err := in.eval(ctx, q.query, q.needsObjects, set.combined.params, halt)
	if err != nil || len(rs) != 1 || len(rs[0].Expressions) != q.exprs[len(q.exprs)-1] {
		return nil, false
	}
	each := time.Since(start) / time.Duration(len(q.members))
	out = make([]Result, len(q.members))
	for k, i := range q.members {
		c := set.policies[i]
		out[k] = Result{Policy: c.name, Source: c.source, Action: c.action, FailurePolicy: c.failure, Ratchet: c.ratchet, Duration: each}
		c.read(&out[k], rs[0].Expressions[q.exprs[k]:q.exprs[k+1]])
	}
	return out, true
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

// inputError is a raw object that cannot be converted for a policy; its
// message is the conversion's.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// eval evaluates a prepared query on the review's input, with params as
// input.parameters, until halt is raised. A query that provably never
// reads the raw objects (needsObjects false) gets null for them, so they
// are converted only for the policies that may; one that cannot be
// converted is an *inputError.
func (in *inputs) eval(ctx context.Context, q rego.PreparedEvalQuery, needsObjects bool, params *ast.Term, halt topdown.Cancel) (rego.ResultSet, error) {
	obj, old := nullTerm, nullTerm
	if needsObjects {
		var err error
		if obj, old, err = in.objects(); err != nil {
			return nil, &inputError{err}
		}
	}
	input := ast.NewObject(
		[2]*ast.Term{workloadKey, in.workload},
		[2]*ast.Term{objectKey, obj},
		[2]*ast.Term{oldObjectKey, old},
		[2]*ast.Term{parametersKey, params},
	)
	return q.Eval(ctx,
		rego.EvalParsedInput(input),
		rego.EvalExternalCancel(halt),
		rego.EvalMetrics(metrics.NoOp()),
	)
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
