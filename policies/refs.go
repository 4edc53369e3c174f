package policies

import "github.com/open-policy-agent/opa/v1/ast"

const inputVar = ast.Var("input")

// readsObjects reports whether a module may read input.object or
// input.oldObject. It is conservative: any use of input other than a ref
// that provably starts input.workload or input.parameters counts, so
// input[x], input["object"], a bare input passed to a function or a with
// input as ... all do.
func readsObjects(mod *ast.Module) bool {
	found := false
	var vis *ast.GenericVisitor
	vis = ast.NewGenericVisitor(func(x any) bool {
		if found {
			return true
		}
		t, ok := x.(*ast.Term)
		if !ok {
			return false
		}
		switch v := t.Value.(type) {
		case ast.Var:
			if v == inputVar {
				found = true
			}
		case ast.Ref:
			if head, ok := v[0].Value.(ast.Var); !ok || head != inputVar {
				return false
			}
			if len(v) < 2 || !v[1].Equal(workloadKey) && !v[1].Equal(parametersKey) {
				found = true
				return true
			}
			// The head is fine; the rest may hold refs of its own, as in
			// input.workload[input.object.kind].
			for _, e := range v[1:] {
				vis.Walk(e)
			}
			return true
		}
		return false
	})
	vis.Walk(mod)
	return found
}
