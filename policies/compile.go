package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Policy is the source of one policy, before compilation.
type Policy struct {
	// Name identifies the policy within its source, and prefixes its
	// messages: "[name] message".
	Name string
	// Source names where the policy comes from, e.g. "WorkloadPolicy" or
	// "directory"; a policy's identity is (Source, Name).
	Source string
	// Filename is the module's file name in messages; Name + ".rego" when
	// empty.
	Filename string
	// Module is the Rego v1 source.
	Module string
	// Action is what deny messages do; ActionDeny when empty.
	Action Action
	// FailurePolicy is what an evaluation error does; FailDeny when empty.
	FailurePolicy FailurePolicy
	// Parameters are handed to the policy as input.parameters; nil is {}.
	Parameters map[string]any
	// Match selects the reviews the policy applies to.
	Match Match
	// NoRatchet judges an UPDATE as if the object were new: a denial the
	// old object had too is still a denial (see Decision.Ratchet).
	NoRatchet bool
}

// Compiled is a policy parsed, compiled and prepared for evaluation. It is
// immutable and safe for concurrent use.
type Compiled struct {
	name, source, filename string
	action                 Action
	failure                FailurePolicy
	ratchet                bool
	match                  matcher
	query                  rego.PreparedEvalQuery
	// rules are the queried rules, in query expression order.
	rules        []string
	params       *ast.Term
	needsObjects bool
	// reads are the keys of input.workload the module may read.
	reads reads
	// guarded are the keys of reads the module reads only through
	// readBuiltin (see guardReads).
	guarded []string
	// module is the parsed module when it can be evaluated in one query
	// with others (see combinable), else nil.
	module *ast.Module
}

// Name returns the policy's name.
func (c *Compiled) Name() string { return c.name }

// Source returns the policy's source.
func (c *Compiled) Source() string { return c.source }

// Filename returns the module's file name as used in messages.
func (c *Compiled) Filename() string { return c.filename }

// Action returns the policy's enforcement action.
func (c *Compiled) Action() Action { return c.action }

// FailurePolicy returns what an evaluation error of the policy does.
func (c *Compiled) FailurePolicy() FailurePolicy { return c.failure }

// NeedsObjects reports whether the module may read input.object or
// input.oldObject, so the raw objects must be converted for it.
func (c *Compiled) NeedsObjects() bool { return c.needsObjects }

// ReadsWorkloadKey reports whether the module may read the key of
// input.workload; see Review.View.
func (c *Compiled) ReadsWorkloadKey(key string) bool { return c.reads.has(key) }

// Matches reports whether the policy applies to a workload of the kind in
// the namespace with the labels.
func (c *Compiled) Matches(kind, namespace string, nsLabels map[string]string) bool {
	return c.match.matches(kind, namespace, nsLabels)
}

// Compile checks a policy against the contract and prepares its query. A
// module that does not parse or compile, or that defines neither deny nor
// warn as a set, gives a *CompileError with the position of every problem;
// invalid Action, FailurePolicy, Parameters or Match give a plain error.
//
// The network builtins (http.send, net.lookup_ip_addr) are not available.
// A builtin's runtime error, such as a division by zero, makes its
// expression undefined, as in opa eval and opa test, rather than failing
// the policy.
func Compile(ctx context.Context, p Policy) (*Compiled, error) {
	if p.Name == "" {
		return nil, errors.New("policy name must not be empty")
	}
	c := &Compiled{name: p.Name, source: p.Source, filename: p.Filename, ratchet: !p.NoRatchet}
	if c.filename == "" {
		c.filename = p.Name + ".rego"
	}
	var err error
	if c.action, err = ParseAction(string(p.Action)); err != nil {
		return nil, err
	}
	if c.failure, err = ParseFailurePolicy(string(p.FailurePolicy)); err != nil {
		return nil, err
	}
	if c.match, err = compileMatch(p.Match); err != nil {
		return nil, err
	}
	params := p.Parameters
	if params == nil {
		params = map[string]any{}
	}
	pv, err := ast.InterfaceToValue(params)
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	c.params = ast.NewTerm(pv)

	mod, err := ast.ParseModuleWithOpts(c.filename, p.Module, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, compileError(c.filename, err)
	}
	if mod == nil {
		return nil, &CompileError{Filename: c.filename, Problems: []Problem{{
			Code: ast.ParseErr, Message: "empty module",
		}}}
	}
	if c.rules, err = contractRules(c.filename, mod); err != nil {
		return nil, err
	}
	if callsReadBuiltin(mod) {
		return nil, errReadBuiltin(c.filename)
	}
	// The module is compiled as written first: what OPA compiled is what
	// the readings are made on (see analyse), and the module the query
	// runs unless a guarded rewrite of it is proven.
	compiler, compiled, err := compileModule(c.filename, mod.Copy())
	if err != nil {
		return nil, err
	}
	a := analyse(mod, compiled)
	c.needsObjects, c.reads = a.needsObjects, a.reads
	source := mod
	if keys := guardKeys(mod, compiled, c.reads); len(keys) > 0 {
		g := mod.Copy()
		for _, key := range keys {
			rewriteReads(g, key)
		}
		if gc, gm, err := compileModule(c.filename, g.Copy()); err == nil && guardProven(gm, keys) {
			compiler, source, c.guarded = gc, g, keys
		}
	}
	if a.combinable {
		c.module = source
	}
	query := make(ast.Body, len(c.rules))
	for i, r := range c.rules {
		query[i] = ast.NewExpr(ast.NewTerm(mod.Package.Path.Append(ast.StringTerm(r))))
	}
	if c.query, err = prepareQuery(ctx, compiler, query); err != nil {
		return nil, compileError(c.filename, err)
	}
	return c, nil
}

// contractRules returns which of deny and warn the module defines, and a
// CompileError when it defines neither or one that is not a set.
func contractRules(filename string, mod *ast.Module) ([]string, error) {
	var found []string
	var problems []Problem
	for _, r := range mod.Rules {
		ref := r.Head.Ref()
		name := ref[0].Value.String()
		if name != "deny" && name != "warn" {
			continue
		}
		if len(ref) != 1 || len(r.Head.Args) > 0 || r.Head.Key == nil || r.Head.Value != nil {
			p := Problem{Code: CodeContract, Message: fmt.Sprintf(
				"%s must be a set of messages: %s contains msg if { ... }", name, name)}
			if loc := r.Location; loc != nil {
				p.Row, p.Col = loc.Row, loc.Col
			}
			problems = append(problems, p)
			continue
		}
		if !slices.Contains(found, name) {
			found = append(found, name)
		}
	}
	if len(problems) == 0 && len(found) == 0 {
		p := Problem{Code: CodeContract, Message: "module defines neither deny nor warn: " +
			"a policy needs deny contains msg if { ... } or warn contains msg if { ... }"}
		if loc := mod.Package.Location; loc != nil {
			p.Row, p.Col = loc.Row, loc.Col
		}
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return nil, &CompileError{Filename: filename, Problems: problems}
	}
	slices.Sort(found) // deny before warn
	return found, nil
}

// prepareQuery prepares the query on the compiled modules. Results stay
// AST terms: the engine checks they are sets and reads them without
// converting to Go values first.
func prepareQuery(ctx context.Context, compiler *ast.Compiler, query ast.Body) (rego.PreparedEvalQuery, error) {
	return rego.New(
		rego.Compiler(compiler),
		rego.ParsedQuery(query),
		rego.Capabilities(capabilities()),
		readBuiltinOption,
		rego.GenerateJSON(func(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }),
	).PrepareForEval(ctx)
}

// compileModule compiles one module alone, as the policy's query runs it,
// and returns the compiler and the module as compiled.
func compileModule(filename string, mod *ast.Module) (*ast.Compiler, *ast.Module, error) {
	compiler := newCompiler()
	if compiler.Compile(map[string]*ast.Module{filename: mod}); compiler.Failed() {
		return nil, nil, compileError(filename, compiler.Errors)
	}
	return compiler, compiler.Modules[filename], nil
}

func newCompiler() *ast.Compiler {
	return ast.NewCompiler().
		WithCapabilities(capabilities()).
		WithDefaultRegoVersion(ast.RegoV1)
}
