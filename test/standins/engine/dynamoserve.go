package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// This file runs Dynamo's frontend and workers (see dynamo.go), answering
// their health endpoints as lib/llm/src/http/service/health.rs (frontend)
// and the runtime's system status server (workers) do.

// rescan is how often the frontend reads the file backend again after its
// first discovery.
const rescan = 250 * time.Millisecond

// discovered is what the frontend's last discovery found.
type discovered struct {
	workers []registration
	err     error
}

// models maps each served model to the directory a worker read it from.
func (d *discovered) models() map[string]string {
	out := map[string]string{}
	for _, w := range d.workers {
		for _, m := range w.Models {
			out[m] = w.Root
		}
	}
	return out
}

// frontend answers the frontend's endpoints from its last discovery; nil
// until the first is done.
type frontend struct {
	last atomic.Pointer[discovered]
}

func (f *frontend) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "live", "message": "Service is live"})
	})
	mux.HandleFunc("GET /health", f.health)
	mux.HandleFunc("GET /v1/models", f.list)
	mux.HandleFunc("GET /v1/models/{rest...}", f.modelReady)
	return mux
}

// health is 503 not_ready until the first discovery is done (or when it
// failed), then 200 healthy, with or without workers.
func (f *frontend) health(w http.ResponseWriter, _ *http.Request) {
	d := f.last.Load()
	switch {
	case d == nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "message": "Initial model discovery in progress",
			"initial_discovery_complete": false})
	case d.err != nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "message": d.err.Error(),
			"initial_discovery_complete": true})
	default:
		instances := []string{}
		for _, r := range d.workers {
			instances = append(instances, r.Instance)
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "healthy", "message": "Service is healthy",
			"initial_discovery_complete": true, "instances": instances})
	}
}

// list is /v1/models: the models the workers registered.
func (f *frontend) list(w http.ResponseWriter, _ *http.Request) {
	list := modelList{Object: "list", Data: []modelCard{}}
	if d := f.last.Load(); d != nil {
		models := d.models()
		for _, id := range slices.Sorted(maps.Keys(models)) {
			list.Data = append(list.Data, modelCard{ID: id, Object: "model", OwnedBy: "modelgate-test-engine", Root: models[id]})
		}
	}
	writeJSON(w, http.StatusOK, list)
}

// modelReady is /v1/models/{model}/ready (a model id may hold slashes):
// 200 once a worker serving the model registered, else 503.
func (f *frontend) modelReady(w http.ResponseWriter, r *http.Request) {
	model, ok := strings.CutSuffix(r.PathValue("rest"), "/ready")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if d := f.last.Load(); d != nil {
		if _, ok := d.models()[model]; ok {
			writeJSON(w, http.StatusOK, map[string]any{"model": model, "ready": true})
			return
		}
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"model": model, "ready": false})
}

// runFrontend runs python -m dynamo.frontend: it listens, then (after
// ENGINE_LOAD_DELAY) reads the discovery backend, and again every rescan.
func runFrontend(ctx context.Context, l launch, p proc) int {
	delay, ok := startDelay(p)
	if !ok {
		return 2
	}
	reg, err := newRegistry(l.Discovery, p.env)
	if err != nil {
		fail(p, l, err)
		return 1
	}
	f := &frontend{}
	srv := listenAt(l, l.Host, l.Port, f.routes(), p)
	if srv == nil {
		return 1
	}
	defer srv.shutdown(p)
	if err := p.wait(ctx, delay); err != nil {
		return 0
	}
	scan := func() *discovered {
		workers, err := reg.workers()
		d := &discovered{workers: workers, err: err}
		f.last.Store(d)
		return d
	}
	d := scan()
	fmt.Fprintf(p.stdout, "engine: initial model discovery complete (%s): %d workers\n", reg, len(d.workers))
	tick := time.NewTicker(rescan)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case err := <-srv.served:
			fmt.Fprintf(p.stderr, "engine: serving: %v\n", err)
			return 1
		case <-tick.C:
			scan()
		}
	}
}

// workerStatus answers a worker's /health and /live (the runtime's system
// status server: both report the same).
type workerStatus struct {
	ready atomic.Bool
}

func (s *workerStatus) routes() http.Handler {
	mux := http.NewServeMux()
	for _, path := range []string{"/health", "/live"} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			if s.ready.Load() {
				writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "endpoints": map[string]string{"generate": "ready"}})
				return
			}
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "notready", "endpoints": map[string]string{"generate": "notready"}})
		})
	}
	return mux
}

// runWorker runs python -m dynamo.vllm or dynamo.sglang: its status server
// on DYN_SYSTEM_PORT when that is a port, then the model read as the
// engine reads it, then the worker registered.
func runWorker(ctx context.Context, l launch, p proc) int {
	delay, ok := startDelay(p)
	if !ok {
		return 2
	}
	reg, err := newRegistry(l.Discovery, p.env)
	if err != nil {
		fail(p, l, err)
		return 1
	}
	status := &workerStatus{}
	served := make(chan error) // never, without a status server
	if l.Port >= 0 {
		srv := listenAt(l, "", l.Port, status.routes(), p)
		if srv == nil {
			return 1
		}
		defer srv.shutdown(p)
		served = srv.served
	} else {
		fmt.Fprintln(p.stdout, "engine: no status server: DYN_SYSTEM_PORT is not a port")
	}
	m, code, ok := loadLogged(ctx, l, p, delay)
	if !ok {
		return code
	}
	names := l.Names
	if len(names) == 0 {
		names = []string{l.Model}
	}
	id, err := reg.register(names, m.Dir)
	if err != nil {
		fail(p, l, err)
		return 1
	}
	defer func() {
		if err := reg.unregister(id); err != nil {
			fmt.Fprintf(p.stderr, "engine: %v\n", err)
		}
	}()
	status.ready.Store(true)
	fmt.Fprintf(p.stdout, "engine: registered %s with discovery %s\n", strings.Join(names, ", "), reg)
	select {
	case <-ctx.Done():
		return 0
	case err := <-served:
		fmt.Fprintf(p.stderr, "engine: serving: %v\n", err)
		return 1
	}
}
