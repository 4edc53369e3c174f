package policies

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestResult is the outcome of one Rego test rule.
type TestResult struct {
	// File is the test file's path in the file system; Row its line.
	File string
	Row  int
	// Package and Name identify the test, e.g. data.owner and test_denied.
	Package, Name string
	// Outcome is "pass", "fail", "error" or "skip" (a todo_test_ rule).
	Outcome string
	// Err is the evaluation error when Outcome is "error".
	Err error
	// Output is what the test printed.
	Output string
	// Duration is how long the test took.
	Duration time.Duration
	// Differences are the inputs of a test that held on which the
	// admission path answers otherwise than OPA; a test with any fails.
	Differences []Difference
}

// TestSummary is the outcome of RunTests.
type TestSummary struct {
	// Results are by file, then line.
	Results                          []TestResult
	Passed, Failed, Errored, Skipped int
}

// String renders the counts: "N passed, N failed", then errored and
// skipped counts when there are any.
func (s TestSummary) String() string {
	out := fmt.Sprintf("%d passed, %d failed", s.Passed, s.Failed)
	if s.Errored > 0 {
		out += fmt.Sprintf(", %d errored", s.Errored)
	}
	if s.Skipped > 0 {
		out += fmt.Sprintf(", %d skipped", s.Skipped)
	}
	return out
}

// RunTests runs the _test.rego files in fsys (searched recursively) with
// OPA's tester. Each <name>_test.rego is compiled with its <name>.rego
// only, as the engine compiles each policy alone; a test file without a
// policy beside it runs alone. Every policy is also checked with Compile,
// so one that breaks the contract fails the run even without tests.
//
// Every input a passing test gives its policy (with input as ..., or with
// on part of input) is judged again as the cluster judges it, with the
// run's other policies (testadmission.go); where the answer differs from
// OPA's the test fails, with the Differences.
//
// The error joins the files that could not be read or compiled (the
// tests of a broken policy are not run); the summary covers the rest.
func RunTests(ctx context.Context, fsys fs.FS) (TestSummary, error) {
	return runTests(ctx, fsys, nil)
}

// runTests is RunTests with the View the admission check gives policies;
// nil is NewObjectView, as the engine's.
func runTests(ctx context.Context, fsys fs.FS, view func(ast.Object) View) (TestSummary, error) {
	type group struct{ policy, test string }
	groups := map[string]*group{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return err
		}
		key := strings.TrimSuffix(strings.TrimSuffix(p, ".rego"), "_test")
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
		}
		if strings.HasSuffix(p, "_test.rego") {
			g.test = p
		} else {
			g.policy = p
		}
		return nil
	})
	if err != nil {
		return TestSummary{}, fmt.Errorf("finding rego tests: %w", err)
	}
	var sum TestSummary
	var errs []error
	check := newAdmissionCheck(view)
	var runs []testRun // runs[i] is sum.Results[i]'s
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		g := groups[key]
		mods := map[string]*ast.Module{}
		var failed bool
		var policy string
		for _, file := range []string{g.policy, g.test} {
			if file == "" {
				continue
			}
			mod, p, err := parseFile(ctx, fsys, file, key, file == g.policy)
			if err != nil {
				errs = append(errs, err)
				failed = true
				continue
			}
			mods[file] = mod
			if p.compiled != nil {
				check.add(p.policy, p.compiled)
				policy = key
			}
		}
		if failed || g.test == "" {
			continue
		}
		if err := instrumentTests(mods[g.test]); err != nil {
			errs = append(errs, &FileError{File: g.test, Err: err})
			continue
		}
		results, inputs, err := runGroup(ctx, mods)
		if err != nil {
			errs = append(errs, compileErrors(err, g.test)...)
			continue
		}
		sum.Results = append(sum.Results, results...)
		for _, in := range inputs {
			runs = append(runs, testRun{policy: policy, inputs: in})
		}
	}
	check.judgeAll(ctx, sum.Results, runs)
	slices.SortFunc(sum.Results, func(a, b TestResult) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Row, b.Row), cmp.Compare(a.Name, b.Name))
	})
	for _, r := range sum.Results {
		switch r.Outcome {
		case "pass":
			sum.Passed++
		case "fail":
			sum.Failed++
		case "skip":
			sum.Skipped++
		default:
			sum.Errored++
		}
	}
	return sum, errors.Join(errs...)
}

// parsed is a parsed policy, compiled (with no parameters) under the name
// key, the path of its file without .rego; both are zero for a test file.
type parsed struct {
	policy   Policy
	compiled *Compiled
}

// parseFile reads and parses one module; a policy is also checked against
// the contract with Compile.
func parseFile(ctx context.Context, fsys fs.FS, file, key string, policy bool) (*ast.Module, parsed, error) {
	var p parsed
	src, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, p, &FileError{File: file, Err: err}
	}
	if policy {
		p.policy = Policy{Name: key, Filename: file, Module: string(src)}
		if p.compiled, err = Compile(ctx, p.policy); err != nil {
			return nil, p, &FileError{File: file, Err: err}
		}
	}
	mod, err := ast.ParseModuleWithOpts(file, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, parsed{}, &FileError{File: file, Err: compileError(file, err)}
	}
	if mod == nil {
		return nil, parsed{}, &FileError{File: file, Err: errors.New("empty module")}
	}
	return mod, p, nil
}

// runGroup runs the tests of the modules, and returns each test's result
// and the inputs it gave (see instrumentTests).
func runGroup(ctx context.Context, mods map[string]*ast.Module) ([]TestResult, [][]captured, error) {
	caps := newCaptures()
	ch, err := tester.NewRunner().
		SetCompiler(ast.NewCompiler().
			WithCapabilities(testCapabilities()).
			WithDefaultRegoVersion(ast.RegoV1).
			WithEnablePrintStatements(true)).
		AddCustomBuiltins(caps.builtins()).
		CapturePrintOutput(true).
		SetModules(mods).
		RunTests(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	var out []TestResult
	var ids []string
	for r := range ch {
		tr := TestResult{Package: r.Package, Name: r.Name, Err: r.Error,
			Output: string(r.Output), Duration: r.Duration}
		ids = append(ids, testID(r.Location))
		if r.Location != nil {
			tr.File, tr.Row = r.Location.File, r.Location.Row
		}
		switch {
		case r.Skip:
			tr.Outcome = "skip"
		case r.Error != nil:
			tr.Outcome = "error"
		case r.Fail:
			tr.Outcome = "fail"
		default:
			tr.Outcome = "pass"
		}
		out = append(out, tr)
	}
	inputs := make([][]captured, len(ids))
	for i, id := range ids {
		inputs[i] = caps.of(id)
	}
	return out, inputs, nil
}

// compileErrors splits OPA's errors by file into one *FileError each.
func compileErrors(err error, fallback string) []error {
	var astErrs ast.Errors
	if !errors.As(err, &astErrs) {
		return []error{&FileError{File: fallback, Err: err}}
	}
	byFile := map[string]*CompileError{}
	for _, e := range astErrs {
		file := fallback
		if e.Location != nil && e.Location.File != "" {
			file = e.Location.File
		}
		ce := byFile[file]
		if ce == nil {
			ce = &CompileError{Filename: file}
			byFile[file] = ce
		}
		ce.Problems = append(ce.Problems, problem(e))
	}
	var out []error
	for _, file := range slices.Sorted(maps.Keys(byFile)) {
		out = append(out, &FileError{File: file, Err: byFile[file]})
	}
	return out
}
