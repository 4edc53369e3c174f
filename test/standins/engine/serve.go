package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
)

// server answers the engines' HTTP endpoints: health (503 while the model
// loads, 200 once it is read), the model list and info, and a metric.
type server struct {
	launch launch
	model  atomic.Pointer[model] // nil while loading
}

// routes are vLLM's, TGI's and SGLang's endpoints that probes and tests
// use; any other path is 404.
func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/health", "/health_generate", "/ping"} {
		mux.HandleFunc("GET "+p, s.health)
	}
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /info", s.info)
	mux.HandleFunc("GET /get_model_info", s.modelInfo)
	mux.HandleFunc("GET /metrics", s.metrics)
	return mux
}

// loaded returns the model, or answers 503 while it loads: TGI's body
// is its router's (router/src/server.rs), the others' the stand-in's own.
// (vLLM answers nothing at all while it loads: its socket is bound, its
// handlers not yet installed.)
func (s *server) loaded(w http.ResponseWriter) (*model, bool) {
	m := s.model.Load()
	if m == nil {
		body := map[string]string{"error": "the model is loading"}
		if s.launch.Engine == engineTGI {
			body = map[string]string{"error": "unhealthy", "error_type": "healthcheck"}
		}
		writeJSON(w, http.StatusServiceUnavailable, body)
	}
	return m, m != nil
}

func (s *server) health(w http.ResponseWriter, _ *http.Request) {
	if _, ok := s.loaded(w); ok {
		w.WriteHeader(http.StatusOK)
	}
}

// modelCard is an entry of /v1/models.
type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	OwnedBy string `json:"owned_by"`
	Root    string `json:"root"` // the directory read
}

// modelList is the body of /v1/models.
type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

func (s *server) models(w http.ResponseWriter, _ *http.Request) {
	m, ok := s.loaded(w)
	if !ok {
		return
	}
	ids := s.launch.Names
	if len(ids) == 0 {
		ids = []string{s.launch.Model}
	}
	list := modelList{Object: "list", Data: []modelCard{}}
	for _, id := range ids {
		list.Data = append(list.Data, modelCard{ID: id, Object: "model", OwnedBy: "modelgate-test-engine", Root: m.Dir})
	}
	writeJSON(w, http.StatusOK, list)
}

// info is TGI's /info.
func (s *server) info(w http.ResponseWriter, _ *http.Request) {
	if _, ok := s.loaded(w); ok {
		writeJSON(w, http.StatusOK, map[string]string{"model_id": s.launch.Model})
	}
}

// modelInfo is SGLang's /get_model_info.
func (s *server) modelInfo(w http.ResponseWriter, _ *http.Request) {
	if _, ok := s.loaded(w); ok {
		writeJSON(w, http.StatusOK, map[string]any{"model_path": s.launch.Model, "tokenizer_path": s.launch.Model, "is_generation": true})
	}
}

func (s *server) metrics(w http.ResponseWriter, _ *http.Request) {
	v := 0
	if s.model.Load() != nil {
		v = 1
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP engine_model_loaded Whether the model has been read.\n# TYPE engine_model_loaded gauge\nengine_model_loaded %d\n", v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client is gone
}
