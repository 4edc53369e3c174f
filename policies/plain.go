package policies

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// The plain path is how OPA itself decides a policy: the module as
// written, compiled alone, evaluated on the whole input, with no reading
// of ours in between (no partial view, guard, combined query or cache).
// The engine's admission path must give the same messages on every input:
// the differential tests and `modelgate test` hold it to that.

// Plain is a policy compiled as OPA compiles it, for the plain path.
type Plain struct {
	name  string
	rules []string
	query rego.PreparedEvalQuery
}

// CompilePlain compiles the module of p alone, as written.
func CompilePlain(ctx context.Context, p Policy) (*Plain, error) {
	filename := p.Filename
	if filename == "" {
		filename = p.Name + ".rego"
	}
	mod, err := ast.ParseModuleWithOpts(filename, p.Module, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, compileError(filename, err)
	}
	if mod == nil {
		return nil, &CompileError{Filename: filename, Problems: []Problem{{Code: ast.ParseErr, Message: "empty module"}}}
	}
	out := &Plain{name: p.Name}
	if out.rules, err = contractRules(filename, mod); err != nil {
		return nil, err
	}
	compiler := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if compiler.Compile(map[string]*ast.Module{filename: mod}); compiler.Failed() {
		return nil, compileError(filename, compiler.Errors)
	}
	query := make(ast.Body, len(out.rules))
	for i, r := range out.rules {
		query[i] = ast.NewExpr(ast.NewTerm(mod.Package.Path.Append(ast.StringTerm(r))))
	}
	out.query, err = rego.New(
		rego.Compiler(compiler),
		rego.ParsedQuery(query),
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, compileError(filename, err)
	}
	return out, nil
}

// Evaluate returns the policy's messages on the whole input: a Result with
// Deny and Warn, or Err.
func (p *Plain) Evaluate(ctx context.Context, input ast.Value) Result {
	res := Result{Policy: p.name}
	rs, err := p.query.Eval(ctx, rego.EvalParsedInput(input))
	switch {
	case err != nil:
		res.Err = err
		return res
	case len(rs) != 1 || len(rs[0].Expressions) != len(p.rules):
		res.Err = fmt.Errorf("query gave %d results, want 1", len(rs))
		return res
	}
	c := Compiled{rules: p.rules}
	c.read(&res, rs[0].Expressions)
	return res
}

// SameMessages reports whether two results of one policy hold the same
// deny and warn messages (with their details) and both failed or neither,
// and if not, says how they differ.
func SameMessages(a, b Result) (bool, string) {
	if (a.Err == nil) != (b.Err == nil) {
		return false, fmt.Sprintf("error %v against %v", a.Err, b.Err)
	}
	for _, pair := range [][2][]Violation{{a.Deny, b.Deny}, {a.Warn, b.Warn}} {
		x, y := violationTexts(pair[0]), violationTexts(pair[1])
		if !slices.Equal(x, y) {
			return false, fmt.Sprintf("messages %q against %q", x, y)
		}
	}
	return true, ""
}

// violationTexts renders each violation as its message and details' JSON,
// sorted.
func violationTexts(vs []Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		d, err := json.Marshal(v.Details)
		if err != nil {
			d = []byte(fmt.Sprint(v.Details))
		}
		out = append(out, v.Msg+"\x00"+string(d))
	}
	slices.Sort(out)
	return out
}

// unprintable numbers the keys of values OPA cannot print.
var unprintable atomic.Uint64

// ObjectView is a View over an object value (input.workload as a test or
// a generated case gives it): ValueOf keeps the top-level keys read, and
// AppendKey prints them in OPA's canonical text. Keys that are not strings
// are always kept: no named read can select them.
type ObjectView struct {
	obj ast.Object
}

var _ View = (*ObjectView)(nil)

// NewObjectView returns the view of obj.
func NewObjectView(obj ast.Object) *ObjectView { return &ObjectView{obj: obj} }

// keep reports whether the view keeps key under read.
func keep(key *ast.Term, read func(string) bool) bool {
	s, ok := key.Value.(ast.String)
	return !ok || read == nil || read(string(s))
}

// ValueOf returns the object with the keys for which read reports true.
func (v *ObjectView) ValueOf(read func(key string) bool) ast.Value {
	out := ast.NewObject()
	v.obj.Foreach(func(k, val *ast.Term) {
		if keep(k, read) {
			out.Insert(k, val)
		}
	})
	return out
}

// AppendKey appends the kept keys and values in key order, each followed
// by a separator neither can contain.
func (v *ObjectView) AppendKey(buf []byte, read func(key string) bool) []byte {
	keys := v.obj.Keys()
	slices.SortFunc(keys, func(a, b *ast.Term) int { return a.Value.Compare(b.Value) })
	for _, k := range keys {
		if !keep(k, read) {
			continue
		}
		var err error
		if buf, err = appendItem(buf, k, v.obj.Get(k)); err != nil {
			// A value OPA cannot print keys nothing: a number used once
			// makes the key unique to this call, so it never hits.
			buf = fmt.Appendf(buf, "\xff%d\x00", unprintable.Add(1))
		}
	}
	return buf
}
