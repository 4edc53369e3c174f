package policies

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The readings of a module (which keys of input.workload it reads, whether
// it reads the raw objects, whether it can share a query, which reads are
// guarded) are made on the module as OPA compiled it, as well as on the
// module as written, and a reading holds only when both agree it is safe:
// reads are the union of both, and combining and guarding need both. The
// compiler moves what the source hides from a plain walk into rule bodies
// (the terms of a rule head's ref, template strings, imports resolved into
// full refs, with, every and comprehension domains), so a form the walk of
// the source misses is still seen. Where a rewrite of our own is compiled
// (guarded reads, combined queries), the compiled result is checked again,
// and discarded for the plain one when the check fails.

// walker returns a visitor that calls f on every node of what it walks,
// descending where f returns false, including the terms of a rule head's
// ref, which ast.GenericVisitor leaves out (p[input.workload.x] contains v).
func walker(f func(vis *ast.GenericVisitor, x any) bool) *ast.GenericVisitor {
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if f(vis, x) {
			return true
		}
		if h, ok := x.(*ast.Head); ok && len(h.Reference) > 1 {
			for _, t := range h.Reference[1:] {
				vis.Walk(t)
			}
		}
		return false
	})
	return vis
}

// analysis is what the engine reads of a module.
type analysis struct {
	needsObjects bool
	reads        reads
	combinable   bool
}

// analyse reads the module as written and as compiled, and keeps the safe
// side of each reading.
func analyse(src, compiled *ast.Module) analysis {
	a := analysis{
		needsObjects: readsObjects(src) || readsObjects(compiled),
		reads:        workloadReads(src),
		combinable:   combinable(src) && combinable(compiled),
	}
	a.reads.add(workloadReads(compiled))
	return a
}

// guardProven reports whether every read of the guarded keys in a compiled
// module goes through readBuiltin: each ref input.workload.<key> is exactly
// that ref and is either the value argument of a readBuiltin call or
// assigned to a variable of the compiler's own (it hoists a call's
// arguments: __local3__ = input.workload.name) that is used nowhere else
// but as such an argument. Then the key's value can reach the evaluation
// only by that call.
func guardProven(mod *ast.Module, keys []string) bool {
	// The compiler's variables that hold a guarded key.
	hoisted := map[*ast.Expr]bool{}
	holders := map[ast.Var]bool{}
	walker(func(_ *ast.GenericVisitor, x any) bool {
		if e, isExpr := x.(*ast.Expr); isExpr {
			if v, ok := holdsKey(e, keys); ok {
				hoisted[e], holders[v] = true, true
			}
		}
		return false
	}).Walk(mod)

	ok := true
	isRead := func(ts []*ast.Term) bool {
		return len(ts) >= 3 && ts[0].Value.Compare(readBuiltinRef) == 0
	}
	var vis *ast.GenericVisitor
	// walkCall walks a call's terms, skipping the read call's value
	// argument when it is the guarded ref or a variable holding it.
	walkCall := func(ts []*ast.Term) {
		for i, t := range ts {
			if i == 2 && isRead(ts) {
				switch v := t.Value.(type) {
				case ast.Ref:
					if guardedKeyRef(v, keys) {
						continue
					}
				case ast.Var:
					if holders[v] {
						continue
					}
				}
			}
			vis.Walk(t)
		}
	}
	vis = walker(func(_ *ast.GenericVisitor, x any) bool {
		if !ok {
			return true
		}
		switch v := x.(type) {
		case *ast.Expr:
			if hoisted[v] {
				return true
			}
			if ts, isCall := v.Terms.([]*ast.Term); isCall {
				walkCall(ts)
				for _, w := range v.With {
					vis.Walk(w)
				}
				return true
			}
		case ast.Call:
			walkCall(v)
			return true
		case ast.Var:
			ok = !holders[v]
		case ast.Ref:
			if refTouchesKeys(v, keys) {
				ok = false
			}
		}
		return false
	})
	vis.Walk(mod)
	return ok
}

// holdsKey reports whether e is the compiler's assignment of a guarded ref
// to a variable of its own, v = input.workload.<key>, and returns v.
func holdsKey(e *ast.Expr, keys []string) (ast.Var, bool) {
	ts, ok := e.Terms.([]*ast.Term)
	if !ok || len(ts) != 3 || e.Negated || len(e.With) > 0 || ts[0].Value.Compare(ast.Equality.Ref()) != 0 {
		return "", false
	}
	for _, pair := range [][2]*ast.Term{{ts[1], ts[2]}, {ts[2], ts[1]}} {
		v, isVar := pair[0].Value.(ast.Var)
		ref, isRef := pair[1].Value.(ast.Ref)
		if isVar && v.IsGenerated() && isRef && guardedKeyRef(ref, keys) {
			return v, true
		}
	}
	return "", false
}

// guardedKeyRef reports whether ref is exactly input.workload.<key> for
// one of keys.
func guardedKeyRef(ref ast.Ref, keys []string) bool {
	for _, k := range keys {
		if exact, _ := guardedRef(ref, k); exact {
			return true
		}
	}
	return false
}

// refTouchesKeys reports whether ref starts input.workload.<key> for one of
// keys, or reads input or input.workload in a way that may reach them.
func refTouchesKeys(ref ast.Ref, keys []string) bool {
	if ref[0].Value.Compare(inputVar) != 0 {
		return false
	}
	if len(ref) < 3 {
		return len(ref) < 2 || !isConstOtherThan(ref[1], workloadName)
	}
	if !ref[1].Equal(workloadKey) {
		return !isConstOtherThan(ref[1], workloadName)
	}
	s, isStr := ref[2].Value.(ast.String)
	if !isStr {
		return true
	}
	for _, k := range keys {
		if string(s) == k {
			return true
		}
	}
	return false
}

// isConstOtherThan reports whether t is a string other than s.
func isConstOtherThan(t *ast.Term, s ast.String) bool {
	v, ok := t.Value.(ast.String)
	return ok && v != s
}

// combinedProven reports whether the modules compiled together for a
// combined query keep apart: the module of member i (by file name) reads
// input only through refs with a constant first key, input.parameters only
// under its own key p<i>, and data only under its own package.
func combinedProven(compiled map[string]*ast.Module, members map[string]int) error {
	for file, mod := range compiled {
		i, known := members[file]
		if !known {
			return fmt.Errorf("module %s is no member", file)
		}
		pkg, key := memberPackage(i), memberKey(i)
		var bad ast.Ref
		vis := walker(func(vis *ast.GenericVisitor, x any) bool {
			if bad != nil {
				return true
			}
			var ref ast.Ref
			switch v := x.(type) {
			case ast.Ref:
				ref = v
			case ast.Var:
				if v == inputVar || v == dataVar {
					bad = ast.Ref{ast.NewTerm(v)}
				}
				return bad != nil
			default:
				return false
			}
			switch {
			case ref[0].Value.Compare(inputVar) == 0:
				if len(ref) < 2 {
					bad = ref
				} else if _, s := ref[1].Value.(ast.String); !s {
					bad = ref
				} else if ref[1].Equal(parametersKey) && (len(ref) < 3 || !ref[2].Equal(key)) {
					bad = ref
				}
			case ref[0].Equal(ast.DefaultRootDocument):
				if !ref.HasPrefix(pkg) {
					bad = ref
				}
			}
			if bad != nil {
				return true
			}
			// The ref's own terms are walked, but not its head again.
			for _, t := range ref[1:] {
				vis.Walk(t)
			}
			return true
		})
		for _, r := range mod.Rules {
			vis.Walk(r)
		}
		if bad != nil {
			return fmt.Errorf("module %s: %v", file, bad)
		}
	}
	return nil
}
