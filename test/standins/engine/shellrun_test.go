package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunShell(t *testing.T) {
	bin := t.TempDir()
	writeFiles(t, bin, map[string][]byte{"sh": nil, "ls": nil, "script": []byte("echo $0 $1\n")})
	for _, n := range []string{"sh", "ls"} {
		if err := chmodX(filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(bin, "script")
	tests := map[string]struct {
		argv       []string
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		"-c with a name and parameters": {
			argv:    []string{"sh", "-c", "echo $0 $1 $#", "name", "a"},
			wantOut: "name a 1\n",
		},
		"-c without a name": {
			argv:    []string{"/bin/sh", "-c", "echo $0"},
			wantOut: "/bin/sh\n",
		},
		"-ec": {
			argv:       []string{"sh", "-ec", "false; echo no"},
			wantStatus: 1,
		},
		"bash -lc": {
			argv:    []string{"bash", "-lc", "echo hi"},
			wantOut: "hi\n",
		},
		"-o pipefail": {
			argv:       []string{"bash", "-euo", "pipefail", "-c", "echo $X"},
			wantStatus: 2,
			wantErr:    "sh: line 1: X: parameter not set\n",
		},
		"a script file": {
			argv:    []string{"sh", script, "x"},
			wantOut: script + " x\n",
		},
		"a command not found": {
			argv:       []string{"sh", "-c", "nope a"},
			wantStatus: 127,
			wantErr:    "sh: nope: not found\n",
		},
		"a command found that the stand-in does not run": {
			argv:       []string{"sh", "-c", "ls"},
			wantStatus: 127,
			wantErr:    "engine: ls: not a program of the stand-in engine (sh, python3, vllm, text-generation-launcher, sglang, tritonserver, pd-sidecar, proxy)\n",
		},
		"sh found in PATH runs in process": {
			argv:    []string{"sh", "-c", `sh -c 'echo inner $0 "$1"' n "a b"`},
			wantOut: "inner n a b\n",
		},
		"a path to sh": {
			argv:    []string{"sh", "-c", filepath.Join(bin, "sh") + " -c 'exit 4'"},
			wantErr: "", wantStatus: 4,
		},
		"an unsupported construct": {
			argv:       []string{"sh", "-c", "vllm serve m | tee log"},
			wantStatus: 2,
			wantErr:    "sh: line 1: pipelines (\"|\"): not supported by the stand-in sh\n",
		},
		"no -c argument": {
			argv:       []string{"sh", "-c"},
			wantStatus: 2,
			wantErr:    "sh: -c requires an argument\n",
		},
		"an unknown option": {
			argv:       []string{"sh", "-i", "-c", "true"},
			wantStatus: 2,
			wantErr:    "sh: set: i: not supported by the stand-in sh\n",
		},
		"nothing to run": {
			argv:       []string{"sh"},
			wantStatus: 2,
			wantErr:    "sh: the stand-in sh runs only sh -c SCRIPT and sh FILE\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut strings.Builder
			status := dispatch(context.Background(), tc.argv, proc{env: env{"PATH": bin}, stdout: &out, stderr: &errOut})
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d", status, tc.wantStatus)
			}
			if diff := cmp.Diff(tc.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErr, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var errOut strings.Builder
	sh := &shell{vars: env{}, stderr: &errOut}
	tests := map[string]struct {
		args []string
		want int
	}{
		"done at once":      {args: []string{"sleep", "0"}, want: 0},
		"stopped":           {args: []string{"sleep", "infinity"}, want: 143},
		"stopped, suffixes": {args: []string{"sleep", "1m", "0.5h", "1d"}, want: 143},
		"bad interval":      {args: []string{"sleep", "soon"}, want: 1},
		"no interval":       {args: []string{"sleep"}, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := ctx
			if tc.want == 0 {
				c = context.Background()
			}
			if got := sh.sleep(c, tc.args); got != tc.want {
				t.Errorf("sleep = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"vllm": nil, "data": nil, "sub/x": nil})
	if err := chmodX(filepath.Join(dir, "vllm")); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		name string
		path *string
		want bool
	}{
		"a name in PATH":                {name: "vllm", path: &dir, want: true},
		"a name not in PATH":            {name: "sglang", path: &dir},
		"a file that is not executable": {name: "data", path: &dir},
		"a directory":                   {name: "sub", path: &dir},
		"a path":                        {name: filepath.Join(dir, "vllm"), want: true},
		"a path to nothing":             {name: filepath.Join(dir, "nope")},
		"no PATH: the default":          {name: "sh", want: true},
		"an empty name":                 {name: "", path: &dir},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := env{}
			if tc.path != nil {
				e["PATH"] = *tc.path
			}
			if got := lookPath(tc.name, e); got != tc.want {
				t.Errorf("lookPath(%q) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}
