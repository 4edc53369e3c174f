package policies

import "github.com/open-policy-agent/opa/v1/ast"

const (
	inputVar     = ast.Var("input")
	workloadName = ast.String("workload")
)

// readsObjects reports whether a module may read input.object or
// input.oldObject. It is conservative: any use of input other than a ref
// that provably starts input.workload or input.parameters counts, so
// input[x], input["object"], a bare input passed to a function or a with
// input as ... all do.
func readsObjects(mod *ast.Module) bool {
	found := false
	eachInputUse(mod, func(ref ast.Ref) bool {
		found = len(ref) < 2 || !ref[1].Equal(workloadKey) && !ref[1].Equal(parametersKey)
		return !found
	})
	return found
}

// eachInputUse calls use for every use of input in mod, until it returns
// false: with the ref for input.a.b..., and nil for a bare input. The
// refs inside a ref are uses of their own, as in
// input.workload[input.object.kind].
func eachInputUse(mod *ast.Module, use func(ast.Ref) bool) {
	stop := false
	walker(func(vis *ast.GenericVisitor, x any) bool {
		if stop {
			return true
		}
		t, ok := x.(*ast.Term)
		if !ok {
			return false
		}
		switch v := t.Value.(type) {
		case ast.Var:
			if v == inputVar {
				stop = !use(nil)
			}
		case ast.Ref:
			if head, ok := v[0].Value.(ast.Var); !ok || head != inputVar {
				return false
			}
			if stop = !use(v); stop {
				return true
			}
			for _, e := range v[1:] {
				vis.Walk(e)
			}
			return true
		}
		return false
	}).Walk(mod)
}

// reads is which top-level keys of input.workload some policies may read:
// every key when all is set, else those in names.
type reads struct {
	all   bool
	names map[string]struct{}
}

// has reports whether key may be read.
func (r *reads) has(key string) bool {
	if r.all {
		return true
	}
	_, ok := r.names[key]
	return ok
}

// add makes r cover what o covers.
func (r *reads) add(o reads) {
	if r.all || o.all {
		r.all, r.names = true, nil
		return
	}
	if r.names == nil {
		r.names = map[string]struct{}{}
	}
	for k := range o.names {
		r.names[k] = struct{}{}
	}
}

// workloadReads returns the top-level keys of input.workload a module may
// read. Like readsObjects it is conservative: only a ref that provably
// names its key, input.workload.labels or input.workload["labels"], counts
// as reading that key alone; input.workload itself (passed to a function,
// assigned, iterated, imported), input.workload[x], input[x], a bare input
// and with input as ... read every key.
func workloadReads(mod *ast.Module) reads {
	r := reads{names: map[string]struct{}{}}
	eachInputUse(mod, func(ref ast.Ref) bool {
		if len(ref) < 2 {
			r.all = true // a bare input, or with input as ...
			return false
		}
		top, ok := ref[1].Value.(ast.String)
		switch {
		case !ok: // input[x] may be input.workload
			r.all = true
			return false
		case top != workloadName:
			return true
		case len(ref) < 3:
			r.all = true
			return false
		}
		key, ok := ref[2].Value.(ast.String)
		if !ok {
			r.all = true
			return false
		}
		r.names[string(key)] = struct{}{}
		return true
	})
	if r.all {
		r.names = nil
	}
	return r
}
