package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// defaultTerminationLog is where the kubelet reads a container's
// termination message.
const defaultTerminationLog = "/dev/termination-log"

// runEngine runs an engine: it listens on l's address first, so that
// probes see 503 while the model loads, then reads the model. It exits 1
// if the model cannot be read, and 0 when stopped (SIGTERM).
func runEngine(ctx context.Context, l launch, p proc) int {
	delay, err := loadDelay(p.env)
	if err != nil {
		fmt.Fprintf(p.stderr, "engine: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, strconv.Itoa(l.Port)))
	if err != nil {
		fail(p, l, err)
		return 1
	}
	s := &server{launch: l}
	hs := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	defer shutdown(hs, p)

	revision := l.Revision
	if revision == "" {
		revision = "main"
	}
	fmt.Fprintf(p.stdout, "engine: %s listening on %s\n", l.Engine, ln.Addr())
	fmt.Fprintf(p.stdout, "engine: loading %s (revision %s); %s\n", l.Model, revision, offline(p.env))
	m, err := load(ctx, l, p, delay)
	switch {
	case ctx.Err() != nil:
		return 0
	case err != nil:
		fail(p, l, err)
		return 1
	}
	s.model.Store(m)
	archs := strings.Join(m.Architectures, ",")
	if archs == "" {
		archs = "without architectures"
	}
	fmt.Fprintf(p.stdout, "engine: loaded %s from %s: %d tensors in %d files, %d bytes, config %s\n",
		l.Model, m.Dir, m.Tensors, m.Files, m.Bytes, archs)
	select {
	case <-ctx.Done():
		return 0
	case err := <-served:
		fmt.Fprintf(p.stderr, "engine: serving: %v\n", err)
		return 1
	}
}

// loadDelay is ENGINE_LOAD_DELAY, a wait before reading the model for
// tests of startup probes.
func loadDelay(e env) (time.Duration, error) {
	v, ok := e.lookup("ENGINE_LOAD_DELAY")
	if !ok || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("ENGINE_LOAD_DELAY=%q: must be a duration such as 2s", v)
	}
	return d, nil
}

// offline says whether the engine would run offline, as huggingface_hub
// decides (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to a true value).
// The stand-in reads only the cache either way.
func offline(e env) string {
	for _, k := range []string{"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"} {
		if v, ok := e.lookup(k); ok && setOf("1", "ON", "YES", "TRUE")[strings.ToUpper(v)] {
			return fmt.Sprintf("offline: %s=%s", k, v)
		}
	}
	return "HF_HUB_OFFLINE is not set: the real engine would ask the Hub first (the stand-in reads the cache only)"
}

// load waits delay, then finds and reads the model.
func load(ctx context.Context, l launch, p proc, delay time.Duration) (*model, error) {
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e := p.env
	if l.HubCache != "" {
		e = e.with("HUGGINGFACE_HUB_CACHE", l.HubCache)
	}
	dir, err := modelDir(l.Model, l.Revision, e)
	if err != nil {
		return nil, err
	}
	m, err := readModel(ctx, dir, p.stdout)
	if err != nil {
		return nil, fmt.Errorf("reading model %s from %s: %w", l.Model, dir, err)
	}
	return m, nil
}

// fail reports why the engine stops: a line naming what went wrong, to
// stderr and to the termination log, then the error the real engine
// would print.
func fail(p proc, l launch, err error) {
	line := "engine: " + err.Error()
	fmt.Fprintln(p.stderr, line)
	if hint := engineError(l.Engine, err); hint != "" {
		fmt.Fprintln(p.stderr, hint)
	}
	writeTerminationLog(p, line)
}

// engineError is the error the real engine prints for err, if known.
func engineError(engine string, err error) string {
	var bad *repoIDError
	var miss *cacheMissError
	switch {
	case errors.As(err, &bad):
		return "huggingface_hub.errors.HFValidationError: " + bad.Reason
	case errors.As(err, &miss) && engine == "tgi":
		return "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, set 'HF_HUB_OFFLINE=0' as environment variable."
	case errors.As(err, &miss):
		return "OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files. Check your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'."
	}
	return ""
}

// writeTerminationLog writes the kubelet's termination message:
// /dev/termination-log, or ENGINE_TERMINATION_LOG in tests. The kubelet
// creates the file; when there is none, nothing is written.
func writeTerminationLog(p proc, msg string) {
	path, ok := p.env.lookup("ENGINE_TERMINATION_LOG")
	if !ok {
		path = defaultTerminationLog
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0) //nolint:gosec // the kubelet's termination log, or the test's override of it
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		_, err = f.WriteString(msg + "\n")
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		fmt.Fprintf(p.stderr, "engine: termination log: %v\n", err)
	}
}

// shutdown stops the server, letting requests in flight finish.
func shutdown(hs *http.Server, p proc) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(ctx); err != nil {
		fmt.Fprintf(p.stderr, "engine: shutting down: %v\n", err)
	}
}
