package celform

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The names a ValidatingAdmissionPolicy's expressions read the admitted
// object and the variables by.
const (
	objectName    = "object"
	oldObjectName = "oldObject"
	variablesName = "variables"
)

// celParser parses CEL as the API server does (its macros, optional
// syntax), keeping each macro's call so that an expression can be printed
// back as written (parser.Unparse).
var celParser = sync.OnceValues(func() (*parser.Parser, error) {
	env, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Env(environment.StoredExpressions)
	if err != nil {
		return nil, fmt.Errorf("creating the CEL environment: %w", err)
	}
	return parser.NewParser(parser.Macros(env.Macros()...), parser.EnableOptionalSyntax(true), parser.PopulateMacroCalls(true))
})

// errBareVariables marks an expression that reads `variables` other than
// as variables.<name>: which variables it reads cannot be known.
var errBareVariables = errors.New("reads variables other than as variables.<name>")

// parsed is an expression parsed, with what it reads: the identifiers that
// name the admitted object (not a comprehension's variable of that name)
// and the variables it reads.
type parsed struct {
	a *ast.AST
	// objects are the ids of the identifiers `object` that name the
	// admitted object; variables those of the identifiers `variables`,
	// each the operand of a select of one variable.
	objects, variables map[int64]bool
	// reads are the names of the variables read, in the order first read.
	reads []string
}

// parse parses expr and finds what it reads, with the scoping of CEL's
// type checker: a comprehension's accumulator is bound in its loop and
// result, its iteration variables in its loop only, and a name bound
// there is not the admitted object or the variables.
func parse(expr string) (*parsed, error) {
	prs, err := celParser()
	if err != nil {
		return nil, err
	}
	a, errs := prs.Parse(common.NewTextSource(expr))
	if len(errs.GetErrors()) > 0 {
		return nil, errors.New(errs.ToDisplayString())
	}
	p := &parsed{a: a, objects: map[int64]bool{}, variables: map[int64]bool{}}
	if err := p.scan(a.Expr(), map[string]int{}); err != nil {
		return nil, err
	}
	return p, nil
}

// readsObject reports whether the expression reads the admitted object
// itself (not through a variable).
func (p *parsed) readsObject() bool { return len(p.objects) > 0 }

// scan records what e reads; bound counts the comprehension variables in
// scope by name.
func (p *parsed) scan(e ast.Expr, bound map[string]int) error {
	free := func(x ast.Expr, name string) bool {
		return x.Kind() == ast.IdentKind && x.AsIdent() == name && bound[name] == 0
	}
	read := func(ident ast.Expr, name string) {
		p.variables[ident.ID()] = true
		for _, r := range p.reads {
			if r == name {
				return
			}
		}
		p.reads = append(p.reads, name)
	}
	switch e.Kind() {
	case ast.IdentKind:
		switch {
		case free(e, objectName):
			p.objects[e.ID()] = true
		case free(e, variablesName):
			return errBareVariables
		}
	case ast.SelectKind:
		s := e.AsSelect()
		if free(s.Operand(), variablesName) {
			read(s.Operand(), s.FieldName())
			return nil
		}
		return p.scan(s.Operand(), bound)
	case ast.CallKind:
		c := e.AsCall()
		if name, ok := optSelectOfVariables(c); ok && free(c.Args()[0], variablesName) {
			read(c.Args()[0], name)
			return nil
		}
		if c.IsMemberFunction() {
			if err := p.scan(c.Target(), bound); err != nil {
				return err
			}
		}
		for _, arg := range c.Args() {
			if err := p.scan(arg, bound); err != nil {
				return err
			}
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			if err := p.scan(el, bound); err != nil {
				return err
			}
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			if err := p.scan(en.AsMapEntry().Key(), bound); err != nil {
				return err
			}
			if err := p.scan(en.AsMapEntry().Value(), bound); err != nil {
				return err
			}
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			if err := p.scan(f.AsStructField().Value(), bound); err != nil {
				return err
			}
		}
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		if err := p.scan(c.IterRange(), bound); err != nil {
			return err
		}
		if err := p.scan(c.AccuInit(), bound); err != nil {
			return err
		}
		bound[c.AccuVar()]++
		defer func() { bound[c.AccuVar()]-- }()
		iter := []string{c.IterVar()}
		if c.HasIterVar2() {
			iter = append(iter, c.IterVar2())
		}
		for _, v := range iter {
			bound[v]++
		}
		for _, part := range []ast.Expr{c.LoopCondition(), c.LoopStep()} {
			if err := p.scan(part, bound); err != nil {
				return err
			}
		}
		for _, v := range iter {
			bound[v]--
		}
		return p.scan(c.Result(), bound)
	}
	return nil
}

// optSelectOfVariables is the variable's name when c is variables.?name
// (an optional select of a literal field).
func optSelectOfVariables(c ast.CallExpr) (string, bool) {
	if c.FunctionName() != operators.OptSelect || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
		return "", false
	}
	name, ok := c.Args()[1].AsLiteral().(types.String)
	return string(name), ok
}

// onOld is the expression read on the old object: each identifier that
// names the admitted object names oldObject instead, and each variable of
// rename is read under its new name; printed back as CEL. It rewrites p's
// syntax tree: call it once.
func (p *parsed) onOld(rename map[string]string) (string, error) {
	fac := ast.NewExprFactory()
	done := map[int64]bool{}
	var visit func(e ast.Expr)
	visit = func(e ast.Expr) {
		switch e.Kind() {
		case ast.IdentKind:
			if p.objects[e.ID()] {
				e.SetKindCase(fac.NewIdent(e.ID(), oldObjectName))
			}
		case ast.SelectKind:
			s := e.AsSelect()
			op := s.Operand()
			if op.Kind() == ast.IdentKind && p.variables[op.ID()] {
				if to, ok := rename[s.FieldName()]; ok && !done[e.ID()] {
					done[e.ID()] = true
					if s.IsTestOnly() {
						e.SetKindCase(fac.NewPresenceTest(e.ID(), op, to))
					} else {
						e.SetKindCase(fac.NewSelect(e.ID(), op, to))
					}
				}
				return
			}
			visit(op)
		case ast.CallKind:
			c := e.AsCall()
			if name, ok := optSelectOfVariables(c); ok && c.Args()[0].Kind() == ast.IdentKind && p.variables[c.Args()[0].ID()] {
				lit := c.Args()[1]
				if to, ok := rename[name]; ok && !done[lit.ID()] {
					done[lit.ID()] = true
					lit.SetKindCase(fac.NewLiteral(lit.ID(), types.String(to)))
				}
				return
			}
			if c.IsMemberFunction() {
				visit(c.Target())
			}
			for _, arg := range c.Args() {
				visit(arg)
			}
		case ast.ListKind:
			for _, el := range e.AsList().Elements() {
				visit(el)
			}
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				visit(en.AsMapEntry().Key())
				visit(en.AsMapEntry().Value())
			}
		case ast.StructKind:
			for _, f := range e.AsStruct().Fields() {
				visit(f.AsStructField().Value())
			}
		case ast.ComprehensionKind:
			c := e.AsComprehension()
			for _, part := range []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
				visit(part)
			}
		}
	}
	// A macro's call, which Unparse prints in place of its expansion,
	// shares the expansion's identifiers and selects (the parser copies
	// only calls and lists into it): both are rewritten, by id.
	visit(p.a.Expr())
	for _, call := range p.a.SourceInfo().MacroCalls() {
		visit(call)
	}
	out, err := parser.Unparse(p.a.Expr(), p.a.SourceInfo())
	if err != nil {
		return "", fmt.Errorf("printing the expression on the old object: %w", err)
	}
	return out, nil
}
