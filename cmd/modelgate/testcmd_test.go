package main

import (
	"strings"
	"testing"
)

// lastLine is the summary line of modelgate test's output.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestTest runs modelgate test on the directories under testdata/test and
// compares the output with testdata/golden/test-<case>.stdout.txt, and the
// summary line and the exit status with the case's.
func TestTest(t *testing.T) {
	cases := map[string]struct {
		args    []string
		summary string
		code    int
	}{
		// A passing Rego test and case, and a case expecting the wrong
		// answer.
		"mixed": {args: []string{"testdata/test/mixed"}, summary: "2 passed, 1 failed", code: 1},
		// A Rego test that holds in OPA on an input the cluster would
		// judge otherwise.
		"cluster": {args: []string{"testdata/test/cluster"}, summary: "2 passed, 1 failed", code: 1},
		// A policy whose CEL form decides otherwise than its Rego.
		"cel": {args: []string{"testdata/test/cel"}, summary: "1 passed, 1 failed", code: 1},
		// A case file with a misspelt field.
		"broken": {args: []string{"testdata/test/broken"}, summary: "0 passed, 0 failed, 1 errored", code: 2},
		// One case file given by name, alongside a path that is neither.
		"files": {args: []string{"testdata/test/mixed/mixed.cases.yaml", "testdata/test/mixed/pod.yaml"},
			summary: "1 passed, 1 failed, 1 errored", code: 2},
		"missing": {args: []string{"testdata/test/no-such-dir"}, summary: "0 passed, 0 failed, 1 errored", code: 2},
		// A directory without tests is an error, not a silent success.
		"no-tests": {args: []string{"testdata/config"}, summary: "0 passed, 0 failed, 1 errored", code: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, "", append([]string{"test"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stdout:\n%s", code, tc.code, stdout)
			}
			if got := lastLine(stdout); got != tc.summary {
				t.Errorf("summary %q, want %q", got, tc.summary)
			}
			if stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
			golden(t, "test-"+name+".stdout.txt", stdout)
		})
	}
}

// The shipped library passes its own Rego tests and its declarative cases
// (policies/library/tests), and both kinds ran.
func TestTestLibrary(t *testing.T) {
	stdout, _, code := runCLI(t, "", "test", "../../policies/library")
	if code != 0 {
		t.Fatalf("exit status %d; output:\n%s", code, stdout)
	}
	for _, want := range []string{
		"PASS ../../policies/library/max-gpus-per-pod_test.rego: ",
		"PASS ../../policies/library/tests/library.cases.yaml: 16 GPUs are denied in team-a\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output has no %q:\n%s", want, stdout)
		}
	}
	if got := lastLine(stdout); !strings.HasSuffix(got, " passed, 0 failed") {
		t.Errorf("summary %q, want every test passed", got)
	}
}

func TestUsage(t *testing.T) {
	cases := map[string]struct {
		args []string
		code int
	}{
		"no command":      {code: 2},
		"unknown command": {args: []string{"frobnicate"}, code: 2},
		"help":            {args: []string{"help"}},
		"render help":     {args: []string{"render", "-h"}},
		"test help":       {args: []string{"test", "-h"}},
		"test no paths":   {args: []string{"test"}, code: 2},
		"render bad flag": {args: []string{"render", "--no-such-flag"}, code: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, "", tc.args...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d", code, tc.code)
			}
			if stdout+stderr == "" {
				t.Error("printed nothing; want the usage")
			}
		})
	}
}
