// Command engine stands in for the LLM serving engines (vLLM, SGLang and
// Text Generation Inference) in modelgate's end-to-end tests. It is built
// into a container image and runs in real containers under a real kubelet.
//
// The real engines need GPUs and a Python stack that the test cluster does
// not have. What the tests need from them is narrower: that a real process
// in a real container, started with the command line a published manifest
// uses, finds the model the loader wrote (a plain directory, or a Hugging
// Face hub cache) where and as the real engine would look for it offline,
// reads all of it, and reports readiness over HTTP. This program does only
// that. It never opens a network connection other than its own listener,
// and it never runs a model.
//
// It is a multi-call binary. The image links /bin/sh, python3, python,
// vllm, text-generation-launcher, sglang and proxy (an HTTP reverse proxy,
// for a sidecar the loader's traffic goes through) to it, and it decides what to
// be from the name it was called by (see dispatch).
package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := dispatch(ctx, os.Args, proc{env: environ(os.Environ()), stdout: os.Stdout, stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// env is a process environment, by variable name.
type env map[string]string

// environ makes an env from NAME=value strings, as os.Environ gives them.
func environ(kv []string) env {
	e := env{}
	for _, s := range kv {
		if k, v, ok := strings.Cut(s, "="); ok {
			e[k] = v
		}
	}
	return e
}

// lookup returns a variable's value and whether it is set.
func (e env) lookup(k string) (string, bool) {
	v, ok := e[k]
	return v, ok
}

// with returns a copy of e with k set to v.
func (e env) with(k, v string) env {
	c := maps.Clone(e)
	if c == nil {
		c = env{}
	}
	c[k] = v
	return c
}

// proc is what a command runs with: its environment and output streams.
type proc struct {
	env    env
	stdout io.Writer
	stderr io.Writer
}

// command runs one program of the multi-call binary; argv[0] is the name
// it was called by.
type command func(ctx context.Context, argv []string, p proc) int

// pythonRE matches the names python is called by: python, python3,
// python3.12.
var pythonRE = regexp.MustCompile(`^python(3(\.[0-9]+)?)?$`)

// commandFor returns the program called name (a base name), or nil.
func commandFor(name string) command {
	switch {
	case name == "engine":
		return runEngineCmd
	case name == "sh" || name == "bash" || name == "dash":
		return runShell
	case name == "proxy":
		return runProxy
	case name == "vllm" || name == "text-generation-launcher" || name == "sglang" || pythonRE.MatchString(name):
		return runLaunch
	}
	return nil
}

// dispatch runs the program argv[0] names, by its base name, and returns
// its exit status.
func dispatch(ctx context.Context, argv []string, p proc) int {
	if len(argv) == 0 {
		fmt.Fprintln(p.stderr, "engine: no program name")
		return 2
	}
	name := filepath.Base(argv[0])
	run := commandFor(name)
	if run == nil {
		fmt.Fprintf(p.stderr, "engine: %s: not a program of the stand-in engine (sh, python3, vllm, text-generation-launcher, sglang, proxy)\n", name)
		return 127
	}
	return run(ctx, argv, p)
}

// runEngineCmd runs `engine PROGRAM ARGS...`, as busybox does, for
// running the binary without a link.
func runEngineCmd(ctx context.Context, argv []string, p proc) int {
	if len(argv) < 2 {
		fmt.Fprintln(p.stderr, "usage: engine sh|python3|vllm|text-generation-launcher|sglang|proxy ARGS...")
		return 2
	}
	return dispatch(ctx, argv[1:], p)
}
