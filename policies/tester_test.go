package policies

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const ownerTests = `package owner_test

import data.owner

test_owner_denied if {
	owner.deny == {"no owner"} with input as {"workload": {"owner": "alice-example.com"}}
}

test_other_owner_allowed if {
	count(owner.deny) == 0 with input as {"workload": {"owner": "bob"}}
}

test_wrong_expectation if {
	count(owner.deny) == 0 with input as {"workload": {"owner": "alice-example.com"}}
}

test_error if {
	x := 1 / to_number(input.zero)
	x > 0
}

todo_test_later if true
`

func TestRunTests(t *testing.T) {
	cases := map[string]struct {
		files    map[string]string
		want     string
		wantOuts map[string]string // test name -> outcome
		wantErr  string
	}{
		"pass, fail, error and skip": {
			files: map[string]string{"owner.rego": ownerRego, "owner_test.rego": ownerTests},
			want:  "2 passed, 2 failed, 1 skipped",
			wantOuts: map[string]string{
				"test_owner_denied": "pass", "test_other_owner_allowed": "pass",
				"test_wrong_expectation": "fail", "test_error": "fail", "todo_test_later": "skip",
			},
		},
		"policies are compiled apart, so packages may repeat": {
			files: map[string]string{
				"owner.rego": ownerRego, "owner_test.rego": "package owner_test\n\ntest_a if data.owner.deny == set() with input.workload.owner as \"x\"\n",
				"other.rego":      "package owner\n\nwarn contains \"w\" if true\n",
				"other_test.rego": "package owner_test\n\ntest_a if data.owner.warn == {\"w\"}\n",
			},
			want:     "2 passed, 0 failed",
			wantOuts: map[string]string{"test_a": "pass"},
		},
		"runtime error": {
			files: map[string]string{"owner.rego": ownerRego, "owner_test.rego": "package owner_test\n\n" +
				"test_conflict if {\n\tdata.owner_test.f(1)\n}\n\nf(x) := 1 if x > 0\n\nf(x) := 2 if x > 0\n"},
			want:     "0 passed, 0 failed, 1 errored",
			wantOuts: map[string]string{"test_conflict": "error"},
		},
		"broken test file": {
			files:   map[string]string{"owner.rego": ownerRego, "owner_test.rego": "package owner_test\n\ntest_x if {\n"},
			want:    "0 passed, 0 failed",
			wantErr: "owner_test.rego:4:0: rego_parse_error: unexpected eof token\n\ttest_x if {\n\t          ^",
		},
		"policy breaking the contract without tests": {
			files:   map[string]string{"lib.rego": "package lib\n\nallow if true\n"},
			want:    "0 passed, 0 failed",
			wantErr: "lib.rego:1:1: modelgate_contract_error: module defines neither deny nor warn: a policy needs deny contains msg if { ... } or warn contains msg if { ... }",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			sum, err := RunTests(context.Background(), os.DirFS(dir))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				var fe *FileError
				if !errors.As(err, &fe) {
					t.Errorf("error %v holds no *FileError", err)
				}
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, sum.String()); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			outs := map[string]string{}
			for _, r := range sum.Results {
				outs[r.Name] = r.Outcome
				if r.File == "" || r.Row == 0 {
					t.Errorf("%s: no position (%q:%d)", r.Name, r.File, r.Row)
				}
			}
			if len(outs) == 0 {
				outs = nil
			}
			if diff := cmp.Diff(tc.wantOuts, outs); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
		})
	}
}
