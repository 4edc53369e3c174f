package policies

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Policies that apply to a review are evaluated in one OPA query when they
// can be: each query costs a fixed setup (a transaction, bindings, the
// input's conversion into the evaluator) that with many small policies
// costs more than the rules themselves. A combinable module is copied with
// its package renamed to data.modelgate_combined.p<i> and input.parameters
// rewritten to input.parameters.p<i>, so policies that share a package
// name or read different parameters keep apart; the copies compile into one
// compiler per Set, in the background, and a query per set of applying
// policies is prepared on first sight, also in the background. Until it is
// ready, and whenever the combined query fails (an error, a timeout), the
// policies are evaluated one query each, as before, so a failing policy
// never takes the others' results with it.

// maxCombinedQueries bounds the prepared queries a Set keeps, one per set
// of applying policies seen; reviews with another set are evaluated one
// query per policy.
const maxCombinedQueries = 64

var (
	combinedRoot = ast.Ref{ast.DefaultRootDocument, ast.StringTerm("modelgate_combined")}
	dataVar      = ast.DefaultRootDocument.Value.(ast.Var)
)

// combinable reports whether a module can be evaluated in one query with
// others: input is read only through refs whose first key is a constant
// (no bare input, input[x] or with input as ...), so input.parameters can
// be renamed, and data only under the module's own package, so no module
// can see another's rules.
func combinable(mod *ast.Module) bool {
	ok := true
	eachInputUse(mod, func(ref ast.Ref) bool {
		if len(ref) < 2 {
			ok = false
		} else if _, s := ref[1].Value.(ast.String); !s {
			ok = false
		}
		return ok
	})
	if !ok {
		return false
	}
	own := mod.Package.Path
	dataRef := func(vis *ast.GenericVisitor, r ast.Ref) bool {
		if !r[0].Equal(ast.DefaultRootDocument) {
			return false
		}
		if !r.HasPrefix(own) {
			ok = false
		}
		for _, e := range r[1:] {
			vis.Walk(e)
		}
		return true
	}
	walker(func(vis *ast.GenericVisitor, x any) bool {
		if !ok {
			return true
		}
		switch v := x.(type) {
		case ast.Ref:
			return dataRef(vis, v)
		case *ast.Term:
			switch tv := v.Value.(type) {
			case ast.Var:
				ok = ok && tv != dataVar
			case ast.Ref:
				return dataRef(vis, tv)
			}
		}
		return false
	}).Walk(mod)
	return ok
}

// renamed returns a copy of mod evaluated as member i of a combined query:
// its package is data.modelgate_combined.p<i> and input.parameters is
// input.parameters.p<i>. (ast.TransformRefs does not reach the refs of
// some x in xs, so the refs are rewritten in place on the copy.)
func renamed(mod *ast.Module, i int) *ast.Module {
	m := mod.Copy()
	own := mod.Package.Path
	pkg := memberPackage(i)
	m.Package.Path = pkg
	walker(func(vis *ast.GenericVisitor, x any) bool {
		t, ok := x.(*ast.Term)
		if !ok {
			return false
		}
		r, ok := t.Value.(ast.Ref)
		if !ok {
			return false
		}
		switch {
		case r.HasPrefix(own):
			r = pkg.Copy().Concat(r[len(own):])
		case r[0].Value.Compare(inputVar) == 0 && len(r) > 1 && r[1].Equal(parametersKey):
			r = append(ast.Ref{r[0], r[1], memberKey(i)}, r[2:]...)
		}
		t.Value = r
		for _, e := range r[1:] {
			vis.Walk(e)
		}
		return true
	}).Walk(m)
	return m
}

// memberPackage returns the package of member i, of terms of its own:
// Transform writes to the terms of the refs it returns.
func memberPackage(i int) ast.Ref {
	return combinedRoot.Copy().Append(ast.StringTerm("p" + strconv.Itoa(i)))
}

func memberKey(i int) *ast.Term { return ast.StringTerm("p" + strconv.Itoa(i)) }

// combined is a Set's policies compiled together, and the queries
// prepared on it, by the set of policies they evaluate.
type combined struct {
	once     sync.Once
	compiler *ast.Compiler // nil when the modules did not compile together
	// params is input.parameters of every combined query: each member's
	// parameters under its key.
	params *ast.Term

	mu        sync.Mutex
	queries   map[string]*combinedQuery
	preparing bool
}

// combinedQuery evaluates the policies of a Set at members, in set order;
// the expressions of member k are exprs[k] to exprs[k+1].
type combinedQuery struct {
	query        rego.PreparedEvalQuery
	members      []int
	exprs        []int
	needsObjects bool
}

// compile compiles the Set's combinable modules together, once.
func (s *Set) compileCombined() *ast.Compiler {
	cb := &s.combined
	cb.once.Do(func() {
		modules := map[string]*ast.Module{}
		members := map[string]int{}
		params := ast.NewObject()
		for i, c := range s.policies {
			if c.module == nil {
				continue
			}
			m := renamed(c.module, i)
			file := "p" + strconv.Itoa(i) + "/" + c.filename
			modules[file], members[file] = m, i
			params.Insert(memberKey(i), c.params)
		}
		if len(modules) < 2 {
			return
		}
		compiler := newCompiler()
		if compiler.Compile(modules); compiler.Failed() {
			return
		}
		// What was compiled must keep the members apart; when it cannot be
		// shown, every policy is evaluated in a query of its own.
		if combinedProven(compiler.Modules, members) != nil {
			return
		}
		cb.compiler, cb.params = compiler, ast.NewTerm(params)
	})
	return cb.compiler
}

// queryKey names a set of members.
func queryKey(members []int) string {
	var b strings.Builder
	for _, m := range members {
		b.WriteString(strconv.Itoa(m))
		b.WriteByte(',')
	}
	return b.String()
}

// combinedQuery returns the prepared query of members, or nil when it is
// not ready yet; then it starts preparing it in the background, one query
// at a time per Set, up to maxCombinedQueries.
func (s *Set) combinedQuery(members []int) *combinedQuery {
	cb := &s.combined
	key := queryKey(members)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if q, ok := cb.queries[key]; ok {
		return q
	}
	if cb.preparing || len(cb.queries) >= maxCombinedQueries {
		return nil
	}
	cb.preparing = true
	go func() {
		q := s.prepareCombined(context.Background(), members)
		cb.mu.Lock()
		defer cb.mu.Unlock()
		cb.preparing = false
		cb.store(key, q) // nil when it cannot be prepared: not tried again
	}()
	return nil
}

// prepareCombined prepares the query of members, nil when the policies do
// not compile together.
func (s *Set) prepareCombined(ctx context.Context, members []int) *combinedQuery {
	compiler := s.compileCombined()
	if compiler == nil {
		return nil
	}
	q := &combinedQuery{members: members, exprs: make([]int, 0, len(members)+1)}
	var body ast.Body
	for _, i := range members {
		c := s.policies[i]
		q.exprs = append(q.exprs, len(body))
		q.needsObjects = q.needsObjects || c.needsObjects
		for _, r := range c.rules {
			body = append(body, ast.NewExpr(ast.NewTerm(memberPackage(i).Append(ast.StringTerm(r)))))
		}
	}
	q.exprs = append(q.exprs, len(body))
	var err error
	if q.query, err = prepareQuery(ctx, compiler, body); err != nil {
		return nil
	}
	return q
}

// Prepare compiles the Set's combinable policies together and prepares the
// query for the reviews all of them apply to, so that the first such
// review is evaluated in one query. The Engine does this in the background
// on Swap; Prepare is for callers that want it done before they go on.
func (s *Set) Prepare(ctx context.Context) {
	members := s.combinableMembers(func(int) bool { return true })
	if len(members) < 2 {
		return
	}
	key := queryKey(members)
	cb := &s.combined
	cb.mu.Lock()
	_, done := cb.queries[key]
	cb.mu.Unlock()
	if done {
		return
	}
	q := s.prepareCombined(ctx, members)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	cb.store(key, q)
}

// store keeps the query of key, unless one is kept already or the bound is
// reached. The caller holds mu.
func (cb *combined) store(key string, q *combinedQuery) {
	if cb.queries == nil {
		cb.queries = map[string]*combinedQuery{}
	}
	if _, ok := cb.queries[key]; !ok && len(cb.queries) < maxCombinedQueries {
		cb.queries[key] = q
	}
}

// combinableMembers returns the indexes of the combinable policies for
// which applies is true.
func (s *Set) combinableMembers(applies func(i int) bool) []int {
	var out []int
	for i, c := range s.all() {
		if c.module != nil && applies(i) {
			out = append(out, i)
		}
	}
	return out
}
