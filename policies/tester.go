package policies

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
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
// The error joins the files that could not be read or compiled (the
// tests of a broken policy are not run); the summary covers the rest.
func RunTests(ctx context.Context, fsys fs.FS) (TestSummary, error) {
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
	for _, key := range slices.Sorted(maps.Keys(groups)) {
		g := groups[key]
		mods := map[string]*ast.Module{}
		var failed bool
		for _, file := range []string{g.policy, g.test} {
			if file == "" {
				continue
			}
			mod, err := parseFile(ctx, fsys, file, file == g.policy)
			if err != nil {
				errs = append(errs, err)
				failed = true
				continue
			}
			mods[file] = mod
		}
		if failed || g.test == "" {
			continue
		}
		results, err := runGroup(ctx, mods)
		if err != nil {
			errs = append(errs, compileErrors(err, g.test)...)
			continue
		}
		sum.Results = append(sum.Results, results...)
	}
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

// parseFile reads and parses one module; a policy is also checked against
// the contract with Compile.
func parseFile(ctx context.Context, fsys fs.FS, file string, policy bool) (*ast.Module, error) {
	src, err := fs.ReadFile(fsys, file)
	if err != nil {
		return nil, &FileError{File: file, Err: err}
	}
	if policy {
		name := strings.TrimSuffix(path.Base(file), ".rego")
		if _, err := Compile(ctx, Policy{Name: name, Filename: file, Module: string(src)}); err != nil {
			return nil, &FileError{File: file, Err: err}
		}
	}
	mod, err := ast.ParseModuleWithOpts(file, string(src), ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, &FileError{File: file, Err: compileError(file, err)}
	}
	if mod == nil {
		return nil, &FileError{File: file, Err: errors.New("empty module")}
	}
	return mod, nil
}

func runGroup(ctx context.Context, mods map[string]*ast.Module) ([]TestResult, error) {
	ch, err := tester.NewRunner().
		SetCompiler(newCompiler().WithEnablePrintStatements(true)).
		CapturePrintOutput(true).
		SetModules(mods).
		RunTests(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []TestResult
	for r := range ch {
		tr := TestResult{Package: r.Package, Name: r.Name, Err: r.Error,
			Output: string(r.Output), Duration: r.Duration}
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
	return out, nil
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
