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
	delay, ok := startDelay(p)
	if !ok {
		return 2
	}
	s := &server{launch: l}
	srv := listenAt(l, l.Host, l.Port, s.routes(), p)
	if srv == nil {
		return 1
	}
	defer srv.shutdown(p)
	m, code, ok := loadLogged(ctx, l, p, delay)
	if !ok {
		return code
	}
	s.model.Store(m)
	return srv.wait(ctx, p)
}

// loadLogged reads l's model as runEngine does, logging what it reads;
// when it fails it returns the exit status (0 when stopped).
func loadLogged(ctx context.Context, l launch, p proc, delay time.Duration) (*model, int, bool) {
	revision := l.Revision
	if revision == "" {
		revision = "main"
	}
	fmt.Fprintf(p.stdout, "engine: loading %s (revision %s); %s\n", l.Model, revision, offline(p.env))
	m, err := load(ctx, l, p, delay)
	switch {
	case ctx.Err() != nil:
		return nil, 0, false
	case err != nil:
		fail(p, l, err)
		return nil, 1, false
	}
	archs := strings.Join(m.Architectures, ",")
	if archs == "" {
		archs = "without architectures"
	}
	fmt.Fprintf(p.stdout, "engine: loaded %s from %s: %d tensors in %d files, %d bytes, config %s\n",
		l.Model, m.Dir, m.Tensors, m.Files, m.Bytes, archs)
	return m, 0, true
}

// listening is an HTTP server started by listen.
type listening struct {
	hs     *http.Server
	addr   net.Addr
	served chan error
}

// listen serves h on addr (host:port) and logs "engine: NAME listening on
// ADDR", the address it listens on, to stdout.
func listen(name, addr string, h http.Handler, p proc) (*listening, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return serve(name, ln, h, p), nil
}

// serve serves h on ln and logs where, as listen does.
func serve(name string, ln net.Listener, h http.Handler, p proc) *listening {
	l := &listening{hs: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr(), served: make(chan error, 1)}
	go func() { l.served <- l.hs.Serve(ln) }()
	fmt.Fprintf(p.stdout, "engine: %s listening on %s\n", name, ln.Addr())
	return l
}

// wait serves until ctx is done (exit status 0) or the server fails (1).
func (l *listening) wait(ctx context.Context, p proc) int {
	select {
	case <-ctx.Done():
		return 0
	case err := <-l.served:
		fmt.Fprintf(p.stderr, "engine: serving: %v\n", err)
		return 1
	}
}

// shutdown stops the server, letting requests in flight finish.
func (l *listening) shutdown(p proc) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.hs.Shutdown(ctx); err != nil {
		fmt.Fprintf(p.stderr, "engine: shutting down: %v\n", err)
	}
}

// startDelay is loadDelay for a program starting: false, after saying
// why, when ENGINE_LOAD_DELAY is malformed (the program then exits 2).
func startDelay(p proc) (time.Duration, bool) {
	d, err := loadDelay(p.env)
	if err != nil {
		fmt.Fprintf(p.stderr, "engine: %v\n", err)
		return 0, false
	}
	return d, true
}

// listenAt serves h on host:port for the engine l, as listen does; nil,
// after failing as the engine would (the program then exits 1), when it
// cannot listen.
func listenAt(l launch, host string, port int, h http.Handler, p proc) *listening {
	srv, err := listen(l.Engine, net.JoinHostPort(host, strconv.Itoa(port)), h, p)
	if err != nil {
		fail(p, l, err)
		return nil
	}
	return srv
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

// load waits delay (and p.hold), then finds and reads the model.
func load(ctx context.Context, l launch, p proc, delay time.Duration) (*model, error) {
	if err := p.wait(ctx, delay); err != nil {
		return nil, err
	}
	cache := hubCacheDir(p.env)
	if l.Engine == engineTGI {
		e := p.env
		if l.HubCache != "" {
			e = e.with("HUGGINGFACE_HUB_CACHE", l.HubCache)
		}
		cache = tgiHubCacheDir(e)
	}
	dir, err := modelDir(l.Model, l.Revision, cache)
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
