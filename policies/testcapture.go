package policies

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/types"
)

// A Rego unit test sees the whole input it gives with `with input as`,
// the policy alone, as written; the cluster gives a policy only the keys of
// input.workload it reads, evaluates it in one query with others, rewrites
// its reads of input.workload.name and caches its decisions. So that a
// passing test means the cluster enforces what it asserts, RunTests records
// every input each test gives a policy and judges it again on the admission
// path (testadmission.go): a test one of whose inputs is answered otherwise
// fails.
//
// The inputs are recorded by rewriting the test module before OPA's tester
// compiles it: each rule that is a test starts with
// modelgate_internal.test("<file>:<row>:<col>"), which names the test in the
// evaluation's builtin cache, and every expression with a `with` on input
// (input, input.workload, input.parameters.max, ...) is preceded by
// __modelgate_input<n>__ := input and
// modelgate_internal.capture(<row>, __modelgate_input<n>__), both under the
// same `with`s, which record input as the expression sees it, every with
// applied. Tests run in parallel: the builtin cache belongs to one test's
// evaluation, so each input is recorded under its own test. The tests'
// outcomes are those of the module as written: the two expressions hold
// whenever the withs can be applied.

var (
	testMarkBuiltin = &rego.Function{
		Name: "modelgate_internal.test",
		Decl: types.NewFunction(types.Args(types.S), types.B),
	}
	captureBuiltin = &rego.Function{
		Name: "modelgate_internal.capture",
		Decl: types.NewFunction(types.Args(types.N, types.A), types.B),
	}
	internalRoot   = ast.Ref{ast.VarTerm("modelgate_internal")}
	testMarkRef    = ast.MustParseRef(testMarkBuiltin.Name)
	captureRef     = ast.MustParseRef(captureBuiltin.Name)
	testMarkerKey  = testMarker{}
	trueTerm       = ast.BooleanTerm(true)
	testCapability = []*ast.Builtin{
		{Name: testMarkBuiltin.Name, Decl: testMarkBuiltin.Decl},
		{Name: captureBuiltin.Name, Decl: captureBuiltin.Decl},
	}
)

// testMarker keys the running test's name in an evaluation's builtin
// cache.
type testMarker struct{}

// captured is one input a test gave, and the line of the with that gave it.
type captured struct {
	row   int
	input ast.Value
}

// captures are the inputs the tests of one run gave, by test (testID of
// the test rule), each input once, in the order first given.
type captures struct {
	mu     sync.Mutex
	byTest map[string][]captured
}

func newCaptures() *captures { return &captures{byTest: map[string][]captured{}} }

// mark is modelgate_internal.test: it names the evaluation's test, unless
// one is named already (a test that calls another stays itself).
func (c *captures) mark(bctx rego.BuiltinContext, id *ast.Term) (*ast.Term, error) {
	if bctx.Cache != nil {
		if _, ok := bctx.Cache.Get(testMarkerKey); !ok {
			bctx.Cache.Put(testMarkerKey, id.Value)
		}
	}
	return trueTerm, nil
}

// capture is modelgate_internal.capture: it records the input under the
// evaluation's test.
func (c *captures) capture(bctx rego.BuiltinContext, row, input *ast.Term) (*ast.Term, error) {
	if bctx.Cache == nil {
		return trueTerm, nil
	}
	id, ok := bctx.Cache.Get(testMarkerKey)
	s, isStr := id.(ast.String)
	if !ok || !isStr {
		return trueTerm, nil
	}
	n, _ := strconv.Atoi(row.Value.String())
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.byTest[string(s)]
	if !slices.ContainsFunc(list, func(x captured) bool { return x.row == n && x.input.Compare(input.Value) == 0 }) {
		c.byTest[string(s)] = append(list, captured{row: n, input: input.Value})
	}
	return trueTerm, nil
}

// of returns the inputs a test gave.
func (c *captures) of(id string) []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byTest[id]
}

// builtins are the tester's declarations and implementations of the two
// builtins, recording into c.
func (c *captures) builtins() []*tester.Builtin {
	return []*tester.Builtin{
		{Decl: testCapability[0], Func: rego.Function1(testMarkBuiltin, c.mark)},
		{Decl: testCapability[1], Func: rego.Function2(captureBuiltin, c.capture)},
	}
}

// testCapabilities are capabilities() with the two builtins, for the
// compiler of a test run.
var testCapabilities = sync.OnceValue(func() *ast.Capabilities {
	c := *capabilities()
	c.Builtins = append(slices.Clip(c.Builtins), testCapability...)
	return &c
})

// testID names a test by its rule's position: file:row:col.
func testID(loc *ast.Location) string {
	if loc == nil {
		return ""
	}
	return loc.File + ":" + strconv.Itoa(loc.Row) + ":" + strconv.Itoa(loc.Col)
}

// isTest reports whether the tester runs the rule as a test: a name in the
// ground prefix of its head's ref starts test_ (as OPA's tester decides).
func isTest(r *ast.Rule) bool {
	for _, t := range r.Head.Ref().GroundPrefix() {
		var name string
		switch v := t.Value.(type) {
		case ast.Var:
			name = string(v)
		case ast.String:
			name = string(v)
		}
		if strings.HasPrefix(name, tester.SkipTestPrefix) {
			return false
		}
		if strings.HasPrefix(name, tester.TestPrefix) {
			return true
		}
	}
	return false
}

// instrumentTests rewrites a test module to record its inputs (see above).
// A module that names modelgate_internal itself is refused: the names are
// modelgate's own.
func instrumentTests(mod *ast.Module) error {
	var own *ast.Term
	walker(func(_ *ast.GenericVisitor, x any) bool {
		if t, ok := x.(*ast.Term); ok {
			if r, ok := t.Value.(ast.Ref); ok && r.HasPrefix(internalRoot) {
				own = t
			}
		}
		return own != nil
	}).Walk(mod)
	if own != nil {
		p := Problem{Code: ast.TypeErr, Message: fmt.Sprintf("undefined ref %v: modelgate_internal is modelgate's own", own)}
		if own.Location != nil {
			p.Row, p.Col = own.Location.Row, own.Location.Col
		}
		return &CompileError{Filename: mod.Package.Location.File, Problems: []Problem{p}}
	}
	for _, r := range mod.Rules {
		if !isTest(r) {
			continue
		}
		id := ast.StringTerm(testID(r.Location))
		for rule := r; rule != nil; rule = rule.Else {
			mark := ast.NewExpr([]*ast.Term{ast.NewTerm(testMarkRef.Copy()), id.Copy()})
			mark.Location = rule.Location
			rule.Body = reindex(append(ast.Body{mark}, rule.Body...))
		}
	}
	// Every body: rules' and else branches', comprehensions' and every's,
	// in heads as well (walker walks head refs).
	var n int
	walker(func(_ *ast.GenericVisitor, x any) bool {
		switch v := x.(type) {
		case *ast.Rule:
			v.Body = withCaptures(v.Body, &n)
		case *ast.ArrayComprehension:
			v.Body = withCaptures(v.Body, &n)
		case *ast.SetComprehension:
			v.Body = withCaptures(v.Body, &n)
		case *ast.ObjectComprehension:
			v.Body = withCaptures(v.Body, &n)
		case *ast.Every:
			v.Body = withCaptures(v.Body, &n)
		}
		return false
	}).Walk(mod)
	return nil
}

// withCaptures returns body with a capture of input before each expression
// that has a with on input: v := input, then capture(row, v), both under
// the same withs (a builtin's argument must be a value, not the ref input,
// which the compiler hoists only out of nested calls). n numbers the
// variables of the module.
func withCaptures(body ast.Body, n *int) ast.Body {
	if !slices.ContainsFunc(body, withOnInput) {
		return body
	}
	out := make(ast.Body, 0, len(body)+2)
	for _, e := range body {
		if withOnInput(e) {
			row := 0
			if e.Location != nil {
				row = e.Location.Row
			}
			v := ast.VarTerm(fmt.Sprintf("__modelgate_input%d__", *n))
			*n++
			bind := ast.Assign.Expr(v, ast.NewTerm(ast.InputRootRef.Copy()))
			call := ast.NewExpr([]*ast.Term{ast.NewTerm(captureRef.Copy()), ast.IntNumberTerm(row), v.Copy()})
			for _, w := range e.With {
				bind.With = append(bind.With, w.Copy())
				call.With = append(call.With, w.Copy())
			}
			bind.Location, call.Location = e.Location, e.Location
			out = append(out, bind, call)
		}
		out = append(out, e)
	}
	return reindex(out)
}

// withOnInput reports whether the expression replaces input, or part of
// it, with `with`.
func withOnInput(e *ast.Expr) bool {
	return slices.ContainsFunc(e.With, func(w *ast.With) bool {
		switch t := w.Target.Value.(type) {
		case ast.Var:
			return t == inputVar
		case ast.Ref:
			return t[0].Value.Compare(inputVar) == 0
		}
		return false
	})
}

// reindex numbers a body's expressions in order.
func reindex(body ast.Body) ast.Body {
	for i, e := range body {
		e.Index = i
	}
	return body
}
