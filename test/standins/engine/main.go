// Command engine stands in for the LLM serving engines in modelgate's
// end-to-end tests: vLLM, SGLang, Text Generation Inference and Triton,
// NVIDIA Dynamo's frontend and its vLLM and SGLang workers, and llm-d's
// routing sidecar, at the releases internal/enginefacts/engines.yaml names.
// It is built into a container image and runs in real containers under a
// real kubelet.
//
// The real engines need GPUs and a Python (or C++) stack that the test
// cluster does not have, and Dynamo's components find each other through
// etcd or the Kubernetes API (DynamoWorkerMetadata objects), which it does
// not run either. What the tests need from them is narrower: that a real
// process in a real container, started with the command line a published
// manifest uses, reads the flags and variables the table lists as the
// release does (their names, aliases and defaults: SGLang listens on
// 127.0.0.1 unless told otherwise), finds the model the loader wrote (a
// plain directory, a Hugging Face hub cache, a Triton model repository)
// where and as the real engine would look for it offline, reads all of it,
// and answers the table's endpoints with the release's status codes, before
// and after. This program does only that. It never runs a model. Dynamo's
// components use only the file discovery backend (DYN_FILE_KV), with a
// record of the stand-in's own, since both ends are the stand-in; the
// routing sidecar forwards to its engine as llm-d's does. It opens no
// network connection other than its own listeners and the sidecar's to its
// engine on the Pod's loopback.
//
// It is a multi-call binary. The image links /bin/sh, python3, python,
// vllm, text-generation-launcher, sglang, tritonserver, /app/pd-sidecar
// and proxy (an HTTP reverse proxy, for a sidecar the loader's traffic goes
// through) to it, and it decides what to be from the name it was called by
// (see dispatch).
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
	"time"
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
	// hold, when not nil, holds an engine before it reads its model (or
	// Dynamo's frontend before its first discovery) until it is closed:
	// tests see what the engine answers before.
	hold <-chan struct{}
}

// wait waits delay, then until p.hold is closed; it returns ctx's error
// when ctx ends first.
func (p proc) wait(ctx context.Context, delay time.Duration) error {
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.hold == nil {
		return nil
	}
	select {
	case <-p.hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// command runs one program of the multi-call binary; argv[0] is the name
// it was called by.
type command func(ctx context.Context, argv []string, p proc) int

// launchers are the programs that start an engine (besides python).
var launchers = setOf("vllm", "text-generation-launcher", "sglang", "tritonserver", "pd-sidecar")

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
	case launchers[name] || pythonRE.MatchString(name):
		return runLaunch
	}
	return nil
}

// programs names the programs of the multi-call binary, for messages.
const programs = "sh, python3, vllm, text-generation-launcher, sglang, tritonserver, pd-sidecar, proxy"

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
		fmt.Fprintf(p.stderr, "engine: %s: not a program of the stand-in engine (%s)\n", name, programs)
		return 127
	}
	return run(ctx, argv, p)
}

// runEngineCmd runs `engine PROGRAM ARGS...`, as busybox does, for
// running the binary without a link.
func runEngineCmd(ctx context.Context, argv []string, p proc) int {
	if len(argv) < 2 {
		fmt.Fprintf(p.stderr, "usage: engine PROGRAM ARGS... (PROGRAM: %s)\n", programs)
		return 2
	}
	return dispatch(ctx, argv[1:], p)
}
