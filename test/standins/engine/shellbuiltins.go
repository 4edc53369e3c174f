package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// defaultPath is sh's PATH when the environment has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// builtin is a command the shell runs itself; args[0] is its name.
type builtin func(sh *shell, ctx context.Context, args []string) int

// builtins are the commands the stand-in's sh runs itself.
var builtins = map[string]builtin{
	"echo":   (*shell).echo,
	"true":   func(*shell, context.Context, []string) int { return 0 },
	":":      func(*shell, context.Context, []string) int { return 0 },
	"false":  func(*shell, context.Context, []string) int { return 1 },
	"exit":   (*shell).exit,
	"export": (*shell).export,
	"set":    (*shell).set,
	"sleep":  (*shell).sleep,
	"cd":     (*shell).cd,
}

func (sh *shell) echo(_ context.Context, args []string) int {
	args, nl := args[1:], "\n"
	if len(args) > 0 && args[0] == "-n" {
		args, nl = args[1:], ""
	}
	fmt.Fprint(sh.stdout, strings.Join(args, " ")+nl)
	return 0
}

func (sh *shell) exit(_ context.Context, args []string) int {
	sh.exited = true
	if len(args) < 2 {
		return sh.status
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		fmt.Fprintf(sh.stderr, "sh: exit: Illegal number: %s\n", args[1])
		return 2
	}
	return n & 0xff
}

func (sh *shell) export(_ context.Context, args []string) int {
	for _, a := range args[1:] {
		name, v, ok := strings.Cut(a, "=")
		if !nameRE.MatchString(name) {
			fmt.Fprintf(sh.stderr, "sh: export: %s: bad variable name\n", a)
			return 2
		}
		if ok {
			sh.vars[name] = v
		}
	}
	return 0
}

// set sets options (-e, -u, -x, -o NAME, and + to unset them), then the
// positional parameters if -- or a word that is not an option follows.
func (sh *shell) set(_ context.Context, args []string) int {
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' && a[0] != '+' {
			if a == "--" {
				i++
			}
			params := []string{"sh"}
			if len(sh.params) > 0 {
				params[0] = sh.params[0]
			}
			sh.params = append(params, args[i:]...)
			return 0
		}
		for _, c := range a[1:] {
			name := string(c)
			if c == 'o' {
				if i++; i >= len(args) {
					fmt.Fprintln(sh.stderr, "sh: set: -o needs an option name")
					return 2
				}
				name = args[i]
			}
			if err := sh.setOption(name, a[0] == '-'); err != nil {
				fmt.Fprintf(sh.stderr, "sh: %v\n", err)
				return 2
			}
		}
	}
	return 0
}

// sleep waits for the sum of its arguments (seconds, or with a suffix s,
// m, h or d; infinity is forever), or until the shell is stopped.
func (sh *shell) sleep(ctx context.Context, args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(sh.stderr, "sleep: missing operand")
		return 1
	}
	total := 0.0
	for _, a := range args[1:] {
		s, err := sleepSeconds(a)
		if err != nil {
			fmt.Fprintf(sh.stderr, "sleep: invalid time interval '%s'\n", a)
			return 1
		}
		total += s
	}
	var done <-chan time.Time
	if total < float64(math.MaxInt64)/float64(time.Second) {
		t := time.NewTimer(time.Duration(total * float64(time.Second)))
		defer t.Stop()
		done = t.C
	}
	select {
	case <-done:
		return 0
	case <-ctx.Done():
		return 128 + 15 // killed by SIGTERM
	}
}

// sleepSeconds reads one argument of sleep, as GNU sleep does.
func sleepSeconds(a string) (float64, error) {
	unit := map[byte]float64{'s': 1, 'm': 60, 'h': 3600, 'd': 86400}
	mult := 1.0
	if n := len(a); n > 1 && unit[a[n-1]] != 0 {
		mult, a = unit[a[n-1]], a[:n-1]
	}
	s, err := strconv.ParseFloat(a, 64)
	if err != nil || s < 0 || math.IsNaN(s) {
		return 0, fmt.Errorf("invalid time interval %q", a)
	}
	return s * mult, nil
}

func (sh *shell) cd(_ context.Context, args []string) int {
	dir := sh.vars["HOME"]
	if len(args) > 1 {
		dir = args[1]
	}
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintf(sh.stderr, "sh: cd: can't cd to %s\n", dir)
		return 2
	}
	if wd, err := os.Getwd(); err == nil {
		sh.vars["PWD"] = wd
	}
	return 0
}

// lookPath tells whether sh finds the command name: a path to an
// executable file, or a name of one in a PATH directory.
func lookPath(name string, e env) bool {
	if strings.Contains(name, "/") {
		return isExecutable(name)
	}
	path, ok := e.lookup("PATH")
	if !ok {
		path = defaultPath
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if name != "" && isExecutable(filepath.Join(dir, name)) {
			return true
		}
	}
	return false
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p) //nolint:gosec // a PATH lookup, as the shell does: the script names the command
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
