package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"
	"strings"
)

// shell runs a parsed script. Every variable is exported: commands see
// the shell's variables, and NAME=value before a command adds to them.
type shell struct {
	vars    env
	params  []string // $0, $1, ...
	status  int      // $?
	exited  bool     // exit or exec ran: run nothing more
	errexit bool     // set -e
	xtrace  bool     // set -x
	nounset bool     // set -u
	stdout  io.Writer
	stderr  io.Writer
	// run runs a command that is not a builtin: the external command in
	// production, a recorder in tests.
	run func(ctx context.Context, argv []string, e env) int
}

// runShell runs `sh -c SCRIPT [NAME [ARG...]]` or `sh FILE [ARG...]`,
// with the options -e, -u, -x and -o NAME before them.
func runShell(ctx context.Context, argv []string, p proc) int {
	sh := &shell{vars: maps.Clone(p.env), stdout: p.stdout, stderr: p.stderr}
	if sh.vars == nil {
		sh.vars = env{}
	}
	sh.run = sh.external
	args, cmdMode := argv[1:], false
	for len(args) > 0 && len(args[0]) > 1 && (args[0][0] == '-' || args[0][0] == '+') {
		a, on := args[0], args[0][0] == '-'
		args = args[1:]
		if a == "--" {
			break
		}
		for _, c := range a[1:] {
			var err error
			switch c {
			case 'c':
				cmdMode = true
			case 'l': // bash's login shell: there is no profile to read
			case 'o':
				if len(args) == 0 {
					err = fmt.Errorf("-o needs an option name")
					break
				}
				err = sh.setOption(args[0], on)
				args = args[1:]
			default:
				err = sh.setOption(string(c), on)
			}
			if err != nil {
				fmt.Fprintf(p.stderr, "sh: %v\n", err)
				return 2
			}
		}
	}
	var src string
	name := argv[0]
	switch {
	case cmdMode && len(args) == 0:
		fmt.Fprintln(p.stderr, "sh: -c requires an argument")
		return 2
	case cmdMode:
		src, args = args[0], args[1:]
		if len(args) > 0 {
			name, args = args[0], args[1:]
		}
	case len(args) > 0:
		b, err := os.ReadFile(args[0]) //nolint:gosec // sh reads the script file it is given, as the real shell does
		if err != nil {
			fmt.Fprintf(p.stderr, "sh: cannot open %s: %v\n", args[0], err)
			return 2
		}
		src, name, args = string(b), args[0], args[1:]
	default:
		fmt.Fprintln(p.stderr, "sh: the stand-in sh runs only sh -c SCRIPT and sh FILE")
		return 2
	}
	sh.params = append([]string{name}, args...)
	s, err := parseScript(src)
	if err != nil {
		fmt.Fprintf(p.stderr, "sh: %v\n", err)
		return 2
	}
	return sh.runScript(ctx, s)
}

// setOption sets a shell option by its letter or its -o name.
func (sh *shell) setOption(name string, on bool) error {
	switch name {
	case "e", "errexit":
		sh.errexit = on
	case "x", "xtrace":
		sh.xtrace = on
	case "u", "nounset":
		sh.nounset = on
	case "pipefail": // there are no pipelines to fail
	default:
		return fmt.Errorf("set: %s: %w", name, errUnsupported)
	}
	return nil
}

// runScript runs s and returns the shell's exit status.
func (sh *shell) runScript(ctx context.Context, s script) int {
	for _, list := range s {
		if ctx.Err() != nil || sh.exited {
			break
		}
		if last := sh.runAndOr(ctx, list); last && sh.errexit && sh.status != 0 {
			break
		}
	}
	return sh.status
}

// runAndOr runs an and-or list and tells whether its last command ran
// (for set -e, which ignores a failure that && or || acts on).
func (sh *shell) runAndOr(ctx context.Context, list andOr) bool {
	sh.runSimple(ctx, list.cmds[0])
	ran := 0
	for i, op := range list.ops {
		if sh.exited || ctx.Err() != nil {
			return false
		}
		if (op == "&&") == (sh.status == 0) {
			sh.runSimple(ctx, list.cmds[i+1])
			ran = i + 1
		}
	}
	return ran == len(list.cmds)-1
}

// runSimple expands and runs a simple command, setting sh.status.
func (sh *shell) runSimple(ctx context.Context, c simple) {
	vals := make([]string, len(c.assigns))
	for i, a := range c.assigns {
		f, err := sh.expand(a.value, false)
		if err != nil {
			sh.fail(c, err)
			return
		}
		vals[i] = strings.Join(f, " ")
	}
	args, err := sh.expandArgs(c)
	if err != nil {
		sh.fail(c, err)
		return
	}
	if len(args) == 0 {
		for i, a := range c.assigns {
			sh.vars[a.name] = vals[i]
		}
		sh.status = 0
		return
	}
	if sh.xtrace {
		fmt.Fprintf(sh.stderr, "+ %s\n", strings.Join(args, " "))
	}
	if b := builtins[args[0]]; b != nil {
		sh.status = b(sh, ctx, args)
	} else {
		e := maps.Clone(sh.vars)
		for i, a := range c.assigns {
			e[a.name] = vals[i]
		}
		sh.status = sh.run(ctx, args, e)
	}
	if c.exec {
		sh.exited = true
	}
}

// fail reports an expansion error; like sh, the script stops.
func (sh *shell) fail(c simple, err error) {
	fmt.Fprintf(sh.stderr, "sh: line %d: %v\n", c.line, err)
	sh.status, sh.exited = 2, true
}

// external runs a command found as sh would find it (a path, or a name
// looked up in PATH), by the multi-call binary's program of that name.
func (sh *shell) external(ctx context.Context, argv []string, e env) int {
	if !lookPath(argv[0], e) {
		fmt.Fprintf(sh.stderr, "sh: %s: not found\n", argv[0])
		return 127
	}
	return dispatch(ctx, argv, proc{env: e, stdout: sh.stdout, stderr: sh.stderr})
}

// expandArgs expands a command's words. As sh does, the NAME=value
// arguments of export are not split into fields.
func (sh *shell) expandArgs(c simple) ([]string, error) {
	var args []string
	for i, w := range c.words {
		_, isAssign := asAssign(w)
		split := i == 0 || !isAssign || !isLiteral(c.words[0], "export")
		f, err := sh.expand(w, split)
		if err != nil {
			return nil, err
		}
		if !split {
			f = []string{strings.Join(f, " ")}
		}
		args = append(args, f...)
	}
	return args, nil
}

// expand expands a word into fields: parameters are replaced by their
// values, and the values of unquoted ones are split at blanks when split
// is set. "$@" is a field per positional parameter.
func (sh *shell) expand(w word, split bool) ([]string, error) {
	var fields []string
	var cur strings.Builder
	has := false // cur is a field, even if empty
	flush := func() {
		if has {
			fields = append(fields, cur.String())
		}
		cur.Reset()
		has = false
	}
	for _, p := range w {
		if p.param == "" {
			cur.WriteString(p.text)
			has = has || p.quoted || p.text != ""
			continue
		}
		if p.param == "@" && p.quoted && p.op == "" {
			for i, v := range sh.args() {
				if i > 0 {
					flush()
				}
				cur.WriteString(v)
				has = true
			}
			continue
		}
		v, err := sh.value(p)
		if err != nil {
			return nil, err
		}
		if p.quoted || !split {
			cur.WriteString(v)
			has = has || p.quoted || v != ""
			continue
		}
		if v != "" && isBlank(rune(v[0])) {
			flush()
		}
		for i, f := range strings.FieldsFunc(v, isBlank) {
			if i > 0 {
				flush()
			}
			cur.WriteString(f)
			has = true
		}
		if v != "" && isBlank(rune(v[len(v)-1])) {
			flush()
		}
	}
	flush()
	return fields, nil
}

// isBlank is the default IFS: space, tab and newline.
func isBlank(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }

// value is a parameter expansion's value.
func (sh *shell) value(p part) (string, error) {
	v, set := sh.param(p.param)
	switch {
	case p.op == ":-" && v == "", p.op == "-" && !set:
		return p.text, nil
	case !set && sh.nounset:
		return "", fmt.Errorf("%s: parameter not set", p.param)
	}
	return v, nil
}

// param is a parameter's value, and whether it is set.
func (sh *shell) param(name string) (string, bool) {
	switch name {
	case "@", "*":
		return strings.Join(sh.args(), " "), true
	case "#":
		return strconv.Itoa(len(sh.args())), true
	case "?":
		return strconv.Itoa(sh.status), true
	}
	if isDigits(name) {
		i, err := strconv.Atoi(name)
		if err != nil || i >= len(sh.params) {
			return "", false
		}
		return sh.params[i], true
	}
	return sh.vars.lookup(name)
}

// args are the positional parameters, $1 on.
func (sh *shell) args() []string {
	if len(sh.params) == 0 {
		return nil
	}
	return sh.params[1:]
}
