package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"

	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
)

const testUsage = `Usage: modelgate test PATH...

Runs, under each directory PATH (recursively), every <name>_test.rego with
its policy <name>.rego, and every declarative case file *.cases.yaml
through the webhook's code; a PATH may also be one case file. Every input
a Rego test gives its policy is judged again as the cluster judges it (with
the other policies, the partial view, the decision cache): a test the
cluster would answer otherwise fails. Prints one line per test (PASS, FAIL,
ERROR or SKIP) and a summary, "N passed, N failed". Exit status: 0 when
every test passed, 1 when one failed, 2 when a file could not be read or
loaded, or a test could not be run.
`

// tally counts the tests run; it prints as policies.TestSummary does,
// "N passed, N failed" and any errored and skipped.
type tally = policies.TestSummary

// counted is how many tests the tally has seen.
func counted(s tally) int { return s.Passed + s.Failed + s.Errored + s.Skipped }

func test(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelgate test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, testUsage) }
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx := logr.NewContext(context.Background(), logr.Discard())
	t := &tester{out: stdout}
	for _, path := range fs.Args() {
		t.path(ctx, path)
	}
	fmt.Fprintln(stdout, t.tally)
	switch {
	case t.Errored > 0:
		return 2
	case t.Failed > 0:
		return 1
	}
	return 0
}

// tester runs tests and prints their results.
type tester struct {
	out    io.Writer
	runner offline.Runner
	tally
}

// path runs the tests of one argument: a directory or a case file.
func (t *tester) path(ctx context.Context, path string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		t.errorf(path, err)
		return
	case !fi.IsDir() && strings.HasSuffix(path, offline.CaseFileSuffix):
		t.caseFile(ctx, path)
		return
	case !fi.IsDir():
		t.errorf(path, fmt.Errorf("not a directory or a *%s file", offline.CaseFileSuffix))
		return
	}
	before := counted(t.tally)
	t.rego(ctx, path)
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, offline.CaseFileSuffix) {
			t.caseFile(ctx, p)
		}
		return nil
	})
	if err != nil {
		t.errorf(path, err)
	}
	if counted(t.tally) == before {
		t.errorf(path, fmt.Errorf("no tests: no _test.rego files and no *%s files", offline.CaseFileSuffix))
	}
}

// rego runs the _test.rego files under dir.
func (t *tester) rego(ctx context.Context, dir string) {
	sum, err := policies.RunTests(ctx, os.DirFS(dir))
	for _, r := range sum.Results {
		name := filepath.Join(dir, r.File) + ": " + r.Name
		switch r.Outcome {
		case "pass":
			t.Passed++
			fmt.Fprintf(t.out, "PASS %s\n", name)
		case "fail":
			t.Failed++
			fmt.Fprintf(t.out, "FAIL %s\n", name)
			if len(r.Differences) == 0 {
				t.detail(fmt.Sprintf("%s:%d: %s.%s is false or undefined", filepath.Join(dir, r.File), r.Row, r.Package, r.Name))
			}
			for _, d := range r.Differences {
				t.detail(difference(filepath.Join(dir, r.File), d))
			}
			t.detail(r.Output)
		case "skip":
			t.Skipped++
			fmt.Fprintf(t.out, "SKIP %s\n", name)
		default:
			t.Errored++
			fmt.Fprintf(t.out, "ERROR %s\n", name)
			if r.Err != nil {
				t.detail(r.Err.Error())
			}
			t.detail(r.Output)
		}
	}
	for _, err := range offline.Unjoin(err) {
		file := dir
		if fe, ok := errors.AsType[*policies.FileError](err); ok {
			// Name the files as the user does, from the current directory.
			fe.File = filepath.Join(dir, fe.File)
			file = fe.File
			if ce, ok := errors.AsType[*policies.CompileError](fe.Err); ok {
				ce.Filename = filepath.Join(dir, ce.Filename)
			}
		}
		t.errorf(file, err)
	}
}

// difference describes an input of a test the cluster would judge
// otherwise than OPA did: where the test gave it, the two answers, and the
// input.
func difference(file string, d policies.Difference) string {
	s := fmt.Sprintf("%s:%d: %s\n  input: %s", file, d.Row, d.Message(), d.Input)
	if d.Note != "" {
		s += "\n  note: " + d.Note
	}
	return s
}

// caseFile runs one declarative case file.
func (t *tester) caseFile(ctx context.Context, path string) {
	f, err := offline.LoadCaseFile(path)
	if err != nil {
		t.errorf(path, err)
		return
	}
	results, err := t.runner.Run(ctx, f)
	if err != nil {
		t.errorf(path, err)
		return
	}
	for _, r := range results {
		name := path + ": " + r.Case.Name
		switch {
		case r.Err != nil:
			t.Errored++
			fmt.Fprintf(t.out, "ERROR %s\n", name)
			t.detail(r.Err.Error())
		case r.Passed:
			t.Passed++
			fmt.Fprintf(t.out, "PASS %s\n", name)
		default:
			t.Failed++
			fmt.Fprintf(t.out, "FAIL %s\n", name)
			t.detail(expected(&r.Case.Expect))
			t.detail(got(&r.Outcome, r.Case.Expect.CELFailsClosed))
		}
	}
}

// expected describes an expectation: the decision, and the messages and
// warnings when they are compared.
func expected(e *offline.Expect) string {
	s := "expected " + string(e.Decision)
	if e.Messages == nil {
		s += " (messages not compared)"
	} else {
		s += messageLines(e.Messages)
	}
	for _, w := range e.Warnings {
		s += "\n  warning: " + w
	}
	return s
}

// got describes an outcome as expected describes an expectation; a
// denial's warnings, which are not compared, are shown too.
func got(o *offline.Outcome, failsClosed []string) string {
	s := "got " + string(o.Decision)
	if o.Skipped != "" {
		s += " (" + o.Skipped + ")"
	}
	s += messageLines(o.Messages())
	if o.Decision == offline.Denied {
		for _, w := range o.Warnings {
			s += "\n  warning: " + w
		}
	}
	if d := o.Disagreements(failsClosed...); len(d) > 0 {
		s += "\nthe CEL forms decide otherwise (the API server enforces them): " + strings.Join(d, "; ")
		if o.CEL != nil {
			s += "\n  CEL" + messageLines(o.CEL.Denials)
		}
	}
	return s
}

func messageLines(msgs []string) string {
	if len(msgs) == 0 {
		return ", no messages"
	}
	return ":\n  " + strings.Join(msgs, "\n  ")
}

// errorf reports a file or test that could not be run.
func (t *tester) errorf(what string, err error) {
	t.Errored++
	fmt.Fprintf(t.out, "ERROR %s\n", what)
	t.detail(err.Error())
}

// detail prints text indented under a result line.
func (t *tester) detail(text string) {
	text = strings.TrimRight(text, "\n")
	if text == "" {
		return
	}
	fmt.Fprintln(t.out, "    "+strings.ReplaceAll(text, "\n", "\n    "))
}
