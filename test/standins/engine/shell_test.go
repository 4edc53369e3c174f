package main

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// call is a command the shell ran that is not a builtin: its arguments,
// and the variables it saw that differ from the shell's start.
type call struct {
	Argv []string
	Env  map[string]string
}

// testShell runs script as sh -c SCRIPT params..., recording commands
// instead of running them.
func testShell(t *testing.T, script string, params []string, e env) (calls []call, status int, stdout, stderr string) {
	t.Helper()
	var out, errOut strings.Builder
	sh := &shell{vars: maps.Clone(e), params: append([]string{"sh"}, params...), stdout: &out, stderr: &errOut}
	if sh.vars == nil {
		sh.vars = env{}
	}
	sh.run = func(_ context.Context, argv []string, got env) int {
		c := call{Argv: argv}
		for k, v := range got {
			if old, ok := e[k]; !ok || old != v {
				if c.Env == nil {
					c.Env = map[string]string{}
				}
				c.Env[k] = v
			}
		}
		calls = append(calls, c)
		return 0
	}
	s, err := parseScript(script)
	if err != nil {
		t.Fatalf("parseScript: %v", err)
	}
	status = sh.runScript(context.Background(), s)
	return calls, status, out.String(), errOut.String()
}

func TestShell(t *testing.T) {
	tests := map[string]struct {
		script     string
		params     []string
		env        env
		want       []call
		wantStatus int
		wantOut    string
		wantErr    string
	}{
		"words": {
			script: "vllm serve org/model --port 8000",
			want:   []call{{Argv: []string{"vllm", "serve", "org/model", "--port", "8000"}}},
		},
		"quotes": {
			script: `vllm serve 'org/model' "--served-model-name" "a b" 'it''s' ""`,
			want:   []call{{Argv: []string{"vllm", "serve", "org/model", "--served-model-name", "a b", "its", ""}}},
		},
		"backslashes": {
			script:  `echo a\ b "c\"d" 'e\f' "g\h" "\$x"`,
			wantOut: `a b c"d e\f g\h $x` + "\n",
		},
		"expansion": {
			script: `vllm serve $MODEL --port ${PORT} "--host=$HOST"`,
			env:    env{"MODEL": "org/model", "PORT": "8001", "HOST": "0.0.0.0"},
			want:   []call{{Argv: []string{"vllm", "serve", "org/model", "--port", "8001", "--host=0.0.0.0"}}},
		},
		"unquoted expansion is split into fields": {
			script: `vllm serve m $ARGS "$ARGS" x$ARGS`,
			env:    env{"ARGS": " --a 1  --b "},
			want:   []call{{Argv: []string{"vllm", "serve", "m", "--a", "1", "--b", " --a 1  --b ", "x", "--a", "1", "--b"}}},
		},
		"empty unquoted expansion vanishes": {
			script: `vllm serve m $EMPTY "$EMPTY" $UNSET`,
			env:    env{"EMPTY": ""},
			want:   []call{{Argv: []string{"vllm", "serve", "m", ""}}},
		},
		"defaults": {
			script: `vllm serve ${MODEL:-org/default} --port ${PORT-8000} ${EMPTY-unused}`,
			env:    env{"MODEL": "", "EMPTY": ""},
			want:   []call{{Argv: []string{"vllm", "serve", "org/default", "--port", "8000"}}},
		},
		"exec": {
			script: "exec vllm serve m; echo after",
			want:   []call{{Argv: []string{"vllm", "serve", "m"}}},
		},
		"assignments before a command are its own": {
			script: "HF_HUB_OFFLINE=1 HOME=/tmp exec vllm serve a",
			env:    env{"HOME": "/home/nonroot"},
			want:   []call{{Argv: []string{"vllm", "serve", "a"}, Env: map[string]string{"HF_HUB_OFFLINE": "1", "HOME": "/tmp"}}},
		},
		"assignments before a command do not last": {
			script: "A=1 vllm x; vllm y",
			want:   []call{{Argv: []string{"vllm", "x"}, Env: map[string]string{"A": "1"}}, {Argv: []string{"vllm", "y"}}},
		},
		"an assignment alone sets a variable": {
			script: `A="x y"; vllm $A`,
			want:   []call{{Argv: []string{"vllm", "x", "y"}, Env: map[string]string{"A": "x y"}}},
		},
		"export": {
			script: `export MODEL=org/model PORT=9 && exec vllm serve "$MODEL"`,
			want:   []call{{Argv: []string{"vllm", "serve", "org/model"}, Env: map[string]string{"MODEL": "org/model", "PORT": "9"}}},
		},
		"export does not split its assignments": {
			script: `export A="x  y"; export B=$A; vllm "$B"`,
			want:   []call{{Argv: []string{"vllm", "x  y"}, Env: map[string]string{"A": "x  y", "B": "x  y"}}},
		},
		"&& stops at a failure": {
			script:     "false && vllm a; vllm b",
			want:       []call{{Argv: []string{"vllm", "b"}}},
			wantStatus: 0,
		},
		"&& goes on after success": {
			script: "true && vllm a && echo done",
			want:   []call{{Argv: []string{"vllm", "a"}}}, wantOut: "done\n",
		},
		"|| runs after a failure": {
			script: "false || vllm a || vllm b",
			want:   []call{{Argv: []string{"vllm", "a"}}},
		},
		"newlines, continuations and comments": {
			script:  "# start\necho one\nvllm serve m \\\n  --port 1 # the port\n\n",
			want:    []call{{Argv: []string{"vllm", "serve", "m", "--port", "1"}}},
			wantOut: "one\n",
		},
		"&& before a newline": {
			script: "true &&\n  vllm a",
			want:   []call{{Argv: []string{"vllm", "a"}}},
		},
		"exit": {
			script:     "echo a; exit 3; echo b",
			wantOut:    "a\n",
			wantStatus: 3,
		},
		"the status is the last command's": {
			script:     "true; false",
			wantStatus: 1,
		},
		"set -e stops at a failure": {
			script:     "set -e; false; echo no",
			wantStatus: 1,
		},
		"set -e ignores a failure && acts on": {
			script:  "set -e; false && true; echo yes",
			wantOut: "yes\n",
		},
		"set -u": {
			script:     "set -eu; echo $NOPE",
			wantStatus: 2,
			wantErr:    "sh: line 1: NOPE: parameter not set\n",
		},
		"set -x": {
			script:  "set -x; echo a   b",
			wantOut: "a b\n",
			wantErr: "+ echo a b\n",
		},
		"positional parameters": {
			script: `vllm serve "$1" --port $2 "$@" $0 $# $9`,
			params: []string{"org/model", "8001"},
			want:   []call{{Argv: []string{"vllm", "serve", "org/model", "--port", "8001", "org/model", "8001", "sh", "2"}}},
		},
		`"$@" without parameters`: {
			script: `vllm "$@"`,
			want:   []call{{Argv: []string{"vllm"}}},
		},
		"set --": {
			script: `set -- a "b c"; vllm "$@"`,
			want:   []call{{Argv: []string{"vllm", "a", "b c"}}},
		},
		"tilde": {
			script:  `echo ~ ~/x a~ "~"`,
			env:     env{"HOME": "/home/nonroot"},
			wantOut: "/home/nonroot /home/nonroot/x a~ ~\n",
		},
		"$ not before a name is literal": {
			script:  `echo $ a$ "$"`,
			wantOut: "$ a$ $\n",
		},
		"$?": {
			script:  "false; echo $?",
			wantOut: "1\n",
		},
		"echo -n": {
			script:  "echo -n a",
			wantOut: "a",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			calls, status, stdout, stderr := testShell(t, tc.script, tc.params, tc.env)
			if diff := cmp.Diff(tc.want, calls); diff != "" {
				t.Errorf("commands (-want +got):\n%s", diff)
			}
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d", status, tc.wantStatus)
			}
			if diff := cmp.Diff(tc.wantOut, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseScriptRefuses(t *testing.T) {
	tests := map[string]struct {
		script      string
		want        string
		unsupported bool
	}{
		"pipe":                    {script: "echo a | cat", want: `line 1: pipelines ("|")`, unsupported: true},
		"redirection":             {script: "vllm serve m > /tmp/log", want: `line 1: redirections (">")`, unsupported: true},
		"2>&1":                    {script: "vllm serve m 2>&1", want: `line 1: redirections (">")`, unsupported: true},
		"background":              {script: "vllm serve m &", want: `line 1: background commands ("&")`, unsupported: true},
		"subshell":                {script: "(vllm serve m)", want: `line 1: subshells ("( )")`, unsupported: true},
		"command substitution":    {script: "echo $(cat /x)", want: "line 1: command substitution ($(...))", unsupported: true},
		"kubelet $(VAR) left":     {script: "vllm serve $(MODEL_ID)", want: "line 1: command substitution ($(...))", unsupported: true},
		"backquotes":              {script: "echo `cat /x`", want: "line 1: command substitution (`...`)", unsupported: true},
		"arithmetic":              {script: "echo $((1+1))", want: "line 1: arithmetic expansion ($((...)))", unsupported: true},
		"if":                      {script: "true\nif true; then echo; fi", want: `line 2: compound commands ("if")`, unsupported: true},
		"for":                     {script: "for m in a b; do echo $m; done", want: `line 1: compound commands ("for")`, unsupported: true},
		"braces":                  {script: "{ echo; }", want: `line 1: compound commands ("{")`, unsupported: true},
		"case":                    {script: "case $A in a) echo ;; esac", want: `line 1: compound commands ("case")`, unsupported: true},
		"string length":           {script: "echo ${#A}", want: "line 1: parameter expansion ${#A}", unsupported: true},
		"nested default":          {script: "echo ${A:-$B}", want: "line 1: expansions or quotes in a default (${A:-$B})", unsupported: true},
		"$$":                      {script: "echo $$", want: "line 1: special parameter $$", unsupported: true},
		"unterminated '":          {script: "echo 'a\nb", want: "line 1: syntax error: unterminated single quote"},
		`unterminated "`:          {script: "echo \"a\nb", want: "line 1: syntax error: unterminated double quote"},
		"&& first":                {script: "&& echo", want: `line 1: syntax error: unexpected "&&"`},
		"&& last":                 {script: "echo &&", want: `line 1: syntax error: end of script after "&&"`},
		"; first":                 {script: "; echo", want: `line 1: syntax error: unexpected ";"`},
		"bad substitution":        {script: "echo ${}", want: "line 1: syntax error: bad substitution ${}"},
		"unterminated ${":         {script: "echo ${A", want: "line 1: syntax error: missing } in ${"},
		"line after a quoted \\n": {script: "echo 'a\nb' |", want: `line 2: pipelines ("|")`, unsupported: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := parseScript(tc.script)
			if err == nil {
				t.Fatal("parseScript succeeded")
			}
			if got := errors.Is(err, errUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(err, errUnsupported) = %v, want %v", got, tc.unsupported)
			}
			want := tc.want
			if tc.unsupported {
				want += ": " + errUnsupported.Error()
			}
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// quoteWord quotes s for sh, so that it is read back as one word, as is.
func quoteWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// FuzzShellWords checks that a script's commands, expanded, quoted and
// parsed again, expand to the same words.
func FuzzShellWords(f *testing.F) {
	for _, s := range []string{
		`vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8000 --tensor-parallel-size 2 --max-model-len 8192`,
		`exec python3 -m vllm.entrypoints.openai.api_server --model "$MODEL_ID" --port 8000 --served-model-name "${SERVED_NAME:-default}"`,
		"set -ex\nexport HF_HUB_OFFLINE=1\nexec text-generation-launcher --model-id $MODEL_ID \\\n  --port ${PORT:-80} # tgi",
		`python3 -m sglang.launch_server --model-path /models/llm --host 0.0.0.0 --port 30000 --json-model-override-args '{"rope_scaling": {"type": "yarn"}}'`,
		`A="x  y" B='it'"'"'s' vllm serve $A "$B" \$C ~/m "$@" ${1-one}`,
		`echo "a\"b\\c\$d" e\ f; true && false || echo ok`,
	} {
		f.Add(s)
	}
	e := env{"MODEL_ID": "org/m", "ARGS": " a  b ", "HOME": "/home/nonroot"}
	expandAll := func(s script) ([][]string, error) {
		sh := &shell{vars: e, params: []string{"sh", "p 1", "p2"}}
		var all [][]string
		for _, list := range s {
			for _, c := range list.cmds {
				args, err := sh.expandArgs(c)
				if err != nil {
					return nil, err
				}
				if len(args) > 0 {
					all = append(all, args)
				}
			}
		}
		return all, nil
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := parseScript(src)
		if err != nil {
			return
		}
		cmds, err := expandAll(s)
		if err != nil {
			return
		}
		for _, args := range cmds {
			quoted := make([]string, len(args))
			for i, a := range args {
				quoted[i] = quoteWord(a)
			}
			s2, err := parseScript(strings.Join(quoted, " "))
			if err != nil {
				t.Fatalf("parsing %q, the quoted %q: %v", quoted, args, err)
			}
			again, err := expandAll(s2)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([][]string{args}, again); diff != "" {
				t.Fatalf("quoted %q reads back differently (-want +got):\n%s", quoted, diff)
			}
		}
	})
}
