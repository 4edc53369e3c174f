package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// This file parses the command lines of NVIDIA Dynamo's frontend (python
// -m dynamo.frontend) and workers (python -m dynamo.vllm, dynamo.sglang),
// and holds their discovery: how workers tell the frontend what they
// serve. Dynamo's default backend is etcd; on Kubernetes its operator sets
// DYN_DISCOVERY_BACKEND=kubernetes (DynamoWorkerMetadata objects). Neither
// runs here, so the stand-in runs only the file backend (a directory both
// see: DYN_FILE_KV, else $TMPDIR/dynamo_store_kv) and mem (this process
// only), and its record in that directory is its own: both ends are the
// stand-in.

// discoveryBackends are --discovery-backend's choices.
var discoveryBackends = []string{"kubernetes", "etcd", "file", "mem"}

// dynamoBool reports a flag of the frontend's or the workers' that takes
// no value.
func dynamoBool(n string) bool {
	return vllmBools[n] || sglangBools[n] || strings.HasPrefix(n, "--no-") || strings.HasPrefix(n, "--enable-") ||
		strings.HasPrefix(n, "--disable-") || setOf("--router-reset-states", "--router-replica-sync", "--enforce-disagg")[n]
}

// parseDiscovery reads --discovery-backend, else DYN_DISCOVERY_BACKEND,
// else etcd.
func parseDiscovery(prog string, s scanned, e env) (string, error) {
	v, from := flagOrEnv(s, "--discovery-backend", e, "DYN_DISCOVERY_BACKEND", "etcd")
	if !slices.Contains(discoveryBackends, v) {
		return "", usage(prog, "argument %s: invalid choice: '%s' (choose from 'kubernetes', 'etcd', 'file', 'mem')", from, v)
	}
	return v, nil
}

// parseFrontend parses python -m dynamo.frontend's arguments: --http-port
// (DYN_HTTP_PORT, 8000), --http-host (DYN_HTTP_HOST, 0.0.0.0) and
// --discovery-backend (frontend_args.py).
func parseFrontend(args []string, e env) (launch, error) {
	const prog = "dynamo.frontend"
	spec := flagSpec{prog: prog, valued: setOf("--http-port", "--http-host", "--discovery-backend"), isBool: dynamoBool}
	s, err := spec.scan(args)
	if err != nil {
		return launch{}, err
	}
	if len(s.pos) > 0 {
		return launch{}, usage(prog, "unrecognized arguments: %s", strings.Join(s.pos, " "))
	}
	portText, from := flagOrEnv(s, "--http-port", e, "DYN_HTTP_PORT", "")
	port, err := parsePort(prog, from, portText, 8000)
	if err != nil {
		return launch{}, err
	}
	host, _ := flagOrEnv(s, "--http-host", e, "DYN_HTTP_HOST", "0.0.0.0")
	discovery, err := parseDiscovery(prog, s, e)
	if err != nil {
		return launch{}, err
	}
	return launch{Engine: engineDynamoFrontend, Host: host, Port: port, Discovery: discovery}, nil
}

// parseWorker parses python -m dynamo.vllm (vLLM's engine arguments:
// --model) or dynamo.sglang (SGLang's: --model-path), with the runtime's
// --discovery-backend, and DYN_SYSTEM_PORT, the status server's port
// (lib/runtime/src/config.rs: -1, the default, is off). DYN_SYSTEM_ENABLED
// is deprecated and turns nothing on.
func parseWorker(module string, args []string, e env) (launch, error) {
	var l launch
	var err error
	if module == "dynamo.vllm" {
		l, err = parseVLLM(args, false)
	} else {
		l, err = parseSGLang(args)
	}
	if err != nil {
		return launch{}, err
	}
	s, err := flagSpec{prog: module, valued: setOf("--discovery-backend"), isBool: dynamoBool}.scan(args)
	if err != nil {
		return launch{}, err
	}
	if l.Discovery, err = parseDiscovery(module, s, e); err != nil {
		return launch{}, err
	}
	l.Engine, l.Host, l.Port = engineDynamoWorker, "", -1
	if v, ok := e.lookup("DYN_SYSTEM_PORT"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n > 65535 {
			return launch{}, &cliError{Code: 1, Msg: fmt.Sprintf("%s: DYN_SYSTEM_PORT=%q: want a port, or -1 for none", module, v)}
		}
		l.Port = max(n, -1)
	}
	if v, ok := e.lookup("DYN_SYSTEM_ENABLED"); ok {
		w := "DYN_SYSTEM_ENABLED is deprecated: Use system_port instead. Set DYN_SYSTEM_PORT to enable the system metrics server."
		if l.Port < 0 {
			w += fmt.Sprintf(" DYN_SYSTEM_ENABLED=%s alone enables nothing: no status server (DYN_SYSTEM_PORT is not set).", v)
		}
		l.Warnings = append(l.Warnings, w)
	}
	return l, nil
}

// registration is the stand-in's record of a worker in the file backend.
type registration struct {
	Instance string   `json:"instance"`
	Models   []string `json:"models"`
	Root     string   `json:"root"` // the directory the worker read
}

// registry is a discovery backend: the file backend's directory, or ""
// for mem.
type registry struct {
	backend string
	dir     string
}

// errNoDiscovery is a discovery backend the stand-in does not have.
var errNoDiscovery = errors.New("discovery backend not available in the stand-in")

// newRegistry opens the discovery backend.
func newRegistry(backend string, e env) (*registry, error) {
	switch backend {
	case "mem":
		return &registry{backend: backend}, nil
	case "file":
		dir, ok := e.lookup("DYN_FILE_KV")
		if !ok || dir == "" {
			tmp, ok := e.lookup("TMPDIR")
			if !ok || tmp == "" {
				tmp = "/tmp"
			}
			dir = filepath.Join(tmp, "dynamo_store_kv")
		}
		return &registry{backend: backend, dir: filepath.Join(dir, "modelgate-standin", "workers")}, nil
	}
	return nil, fmt.Errorf("%w: %s needs etcd (kubernetes: the API server and Dynamo's DynamoWorkerMetadata), "+
		"which do not run here: use --discovery-backend file with DYN_FILE_KV", errNoDiscovery, backend)
}

// String says where registrations go.
func (r *registry) String() string {
	if r.dir == "" {
		return r.backend + " (this process only)"
	}
	return r.backend + " " + r.dir
}

// register records a worker serving models, read from root, and returns
// what unregister takes.
func (r *registry) register(models []string, root string) (string, error) {
	if r.dir == "" {
		return "", nil
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b)
	data, err := json.Marshal(registration{Instance: id, Models: models, Root: root})
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil { //nolint:gosec // shared with the frontend, as Dynamo's file store is
		return "", fmt.Errorf("discovery: %w", err)
	}
	tmp := filepath.Join(r.dir, "."+id)
	path := filepath.Join(r.dir, id+".json")
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // read by the frontend, as Dynamo's file store is
		return "", fmt.Errorf("discovery: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	return path, nil
}

// unregister removes what register recorded.
func (r *registry) unregister(path string) error {
	if path == "" {
		return nil
	}
	return os.Remove(path)
}

// workers lists the registered workers; none before the first registers.
func (r *registry) workers() ([]registration, error) {
	if r.dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(r.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var out []registration
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // gone since listed: the worker stopped
		}
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		var reg registration
		if err := json.Unmarshal(b, &reg); err != nil {
			return nil, fmt.Errorf("discovery: %s: %w", e.Name(), err)
		}
		out = append(out, reg)
	}
	return out, nil
}
