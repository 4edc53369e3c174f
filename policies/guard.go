package policies

import (
	"context"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"
)

// Guarded reads: the keys of input.workload that tell one object from its
// siblings (a Pod's generated name) are read by the library, and by most
// policies, only to write a message. Were they part of every decision's
// cache key, the N Pods of a Deployment would be N misses. So each read of
// a guarded key, input.workload.name, is rewritten at compile time into
// modelgate_internal.read("name", input.workload.name), a builtin that
// returns its second argument and tells the review it was called. An
// evaluation that never called it gives the same decision for every value
// of the key: evaluation is deterministic, and the key's value could only
// reach it through that call. The DecisionCache keys such a decision
// without the guarded keys, and one that called it with them.
//
// A module is guarded for a key only when every read of it is the exact
// ref input.workload.<key> in a rule (not a longer ref, an import, a with
// target or a negated expression, and no read of input.workload or input
// as a whole); else the key is part of every key of the Sets it belongs
// to. TestGuardedReadsKeepTheAnswers holds rewritten modules to the
// answers of the modules as written.

// guardedKeys are the view's keys whose reads are guarded.
var guardedKeys = []string{"name"}

// readBuiltin is the builtin guarded reads are rewritten into.
var readBuiltin = &rego.Function{
	Name: "modelgate_internal.read",
	Decl: types.NewFunction(types.Args(types.S, types.A), types.A),
}

var readBuiltinRef = ast.MustParseRef(readBuiltin.Name)

// guardedReads is told, through the evaluation's context, that a guarded
// key was read. Policies of a review run one after another.
type guardedReads struct{ read bool }

type guardedReadsKey struct{}

// withGuardedReads returns ctx carrying g.
func withGuardedReads(ctx context.Context, g *guardedReads) context.Context {
	return context.WithValue(ctx, guardedReadsKey{}, g)
}

// readImpl is readBuiltin: it returns v and marks the review's reads.
func readImpl(bctx rego.BuiltinContext, _, v *ast.Term) (*ast.Term, error) {
	if g, ok := bctx.Context.Value(guardedReadsKey{}).(*guardedReads); ok {
		g.read = true
	}
	return v, nil
}

// readBuiltinOption makes readBuiltin available to a query.
var readBuiltinOption = rego.Function2(readBuiltin, readImpl)

// readBuiltinDecl is readBuiltin's declaration, for the compiler's
// capabilities.
var readBuiltinDecl = &ast.Builtin{Name: readBuiltin.Name, Decl: readBuiltin.Decl}

// callsReadBuiltin reports whether the module names readBuiltin itself:
// only the rewrite may.
func callsReadBuiltin(mod *ast.Module) bool {
	found := false
	walker(func(_ *ast.GenericVisitor, x any) bool {
		if r, ok := x.(ast.Ref); ok && r.HasPrefix(readBuiltinRef) {
			found = true
		}
		return found
	}).Walk(mod)
	return found
}

// guardKeys returns the guarded keys whose every read, in the module as
// written and as compiled, can be rewritten into a readBuiltin call. The
// rewrite itself is proven on what OPA compiles of it (guardProven).
func guardKeys(src, compiled *ast.Module, r reads) []string {
	if r.all {
		return nil
	}
	var out []string
	for _, key := range guardedKeys {
		if r.has(key) && guardable(src, key) && guardable(compiled, key) {
			out = append(out, key)
		}
	}
	return out
}

// guardedRef reports whether ref is input.workload.<key>, and prefix
// whether it starts so.
func guardedRef(ref ast.Ref, key string) (exact, prefix bool) {
	if len(ref) < 3 || ref[0].Value.Compare(inputVar) != 0 || !ref[1].Equal(workloadKey) {
		return false, false
	}
	if s, ok := ref[2].Value.(ast.String); !ok || string(s) != key {
		return false, false
	}
	return len(ref) == 3, true
}

// guardable reports whether every read of input.workload.<key> in mod can
// be rewritten: none is longer than the key, in an import, a with target,
// a rule's name or a function's arguments.
func guardable(mod *ast.Module, key string) bool {
	for _, imp := range mod.Imports {
		if ref, ok := imp.Path.Value.(ast.Ref); ok && ref[0].Value.Compare(inputVar) == 0 {
			return false
		}
	}
	ok := true
	eachInputUse(mod, func(ref ast.Ref) bool {
		if exact, prefix := guardedRef(ref, key); prefix && !exact {
			ok = false
		}
		return ok
	})
	if !ok {
		return false
	}
	// OPA evaluates a call's arguments before the expression that holds
	// it: in a negation, the read would move outside the not, where an
	// absent key fails the rule instead of satisfying the not.
	walker(func(_ *ast.GenericVisitor, x any) bool {
		if e, isExpr := x.(*ast.Expr); isExpr && negates(e) && readsKey(e, key) {
			ok = false
		}
		return !ok
	}).Walk(mod)
	ast.WalkWiths(mod, func(w *ast.With) bool {
		if ref, isRef := w.Target.Value.(ast.Ref); isRef && ref[0].Value.Compare(inputVar) == 0 {
			ok = false
		}
		return !ok
	})
	for _, rule := range mod.Rules {
		for r := rule; r != nil && ok; r = r.Else {
			for _, t := range r.Head.Reference {
				ok = ok && !mentionsInput(t)
			}
			for _, t := range r.Head.Args {
				ok = ok && !mentionsInput(t)
			}
		}
	}
	return ok
}

// negates reports whether e is negated or holds a negation of its own (a
// not block, or the logical forms that may hold one).
func negates(e *ast.Expr) bool {
	switch e.Terms.(type) {
	case *ast.Not, *ast.LogicalAnd, *ast.LogicalOr:
		return true
	}
	return e.Negated
}

// readsKey reports whether x holds the ref input.workload.<key>.
func readsKey(x any, key string) bool {
	found := false
	walker(func(_ *ast.GenericVisitor, x any) bool {
		if r, ok := x.(ast.Ref); ok {
			_, prefix := guardedRef(r, key)
			found = found || prefix
		}
		return found
	}).Walk(x)
	return found
}

// mentionsInput reports whether x uses input at all.
func mentionsInput(x any) bool {
	found := false
	ast.WalkVars(x, func(v ast.Var) bool {
		found = found || v == inputVar
		return found
	})
	return found
}

// rewriteReads replaces every input.workload.<key> in mod's rules (their
// bodies, keys, values and else branches) by a readBuiltin call on it.
func rewriteReads(mod *ast.Module, key string) {
	keyTerm := ast.StringTerm(key)
	vis := walker(func(_ *ast.GenericVisitor, x any) bool {
		t, ok := x.(*ast.Term)
		if !ok {
			return false
		}
		ref, ok := t.Value.(ast.Ref)
		if !ok {
			return false
		}
		if exact, _ := guardedRef(ref, key); exact {
			t.Value = ast.Call{ast.NewTerm(readBuiltinRef.Copy()), keyTerm.Copy(), ast.NewTerm(ref)}
			return true
		}
		return false // walk the ref's own terms: input.workload.labels[input.workload.name]
	})
	for _, rule := range mod.Rules {
		vis.Walk(rule)
	}
}

// setGuarded returns the guarded keys of a Set: those some policy reads
// and every policy that reads them reads through guarded refs.
func setGuarded(cs []*Compiled, r reads) []string {
	if r.all {
		return nil
	}
	var out []string
	for _, key := range guardedKeys {
		if !r.has(key) {
			continue
		}
		if !slices.ContainsFunc(cs, func(c *Compiled) bool { return c.reads.has(key) && !slices.Contains(c.guarded, key) }) {
			out = append(out, key)
		}
	}
	return out
}

// errReadBuiltin is a module that calls readBuiltin itself.
func errReadBuiltin(filename string) error {
	return &CompileError{Filename: filename, Problems: []Problem{{
		Code:    ast.TypeErr,
		Message: fmt.Sprintf("undefined function %s: it is modelgate's own", readBuiltin.Name),
	}}}
}
