package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestServer(t *testing.T) {
	type answer struct {
		Code int
		Body string
	}
	loading := `{"error":"the model is loading"}` + "\n"
	metrics := func(v string) string {
		return "# HELP engine_model_loaded Whether the model has been read.\n# TYPE engine_model_loaded gauge\nengine_model_loaded " + v + "\n"
	}
	tests := map[string]struct {
		launch launch
		loaded bool
		method string
		path   string
		want   answer
	}{
		"health while loading":  {path: "/health", want: answer{503, loading}},
		"models while loading":  {path: "/v1/models", want: answer{503, loading}},
		"metrics while loading": {path: "/metrics", want: answer{200, metrics("0")}},
		"TGI's health while loading": {launch: launch{Engine: engineTGI}, path: "/health",
			want: answer{503, `{"error":"unhealthy","error_type":"healthcheck"}` + "\n"}},
		"health":          {loaded: true, path: "/health", want: answer{200, ""}},
		"health_generate": {loaded: true, path: "/health_generate", want: answer{200, ""}},
		"ping":            {loaded: true, path: "/ping", want: answer{200, ""}},
		"HEAD health":     {loaded: true, method: http.MethodHead, path: "/health", want: answer{200, ""}},
		"POST health":     {loaded: true, method: http.MethodPost, path: "/health", want: answer{405, "Method Not Allowed\n"}},
		"unknown path":    {loaded: true, path: "/v1/completions", want: answer{404, "404 page not found\n"}},
		"metrics":         {loaded: true, path: "/metrics", want: answer{200, metrics("1")}},
		"models: the model as given": {
			launch: launch{Model: "org/tiny"}, loaded: true, path: "/v1/models",
			want: answer{200, `{"object":"list","data":[{"id":"org/tiny","object":"model","owned_by":"modelgate-test-engine","root":"/cache/snap"}]}` + "\n"},
		},
		"models: served model names": {
			launch: launch{Model: "org/tiny", Names: []string{"a", "b"}}, loaded: true, path: "/v1/models",
			want: answer{200, `{"object":"list","data":[` +
				`{"id":"a","object":"model","owned_by":"modelgate-test-engine","root":"/cache/snap"},` +
				`{"id":"b","object":"model","owned_by":"modelgate-test-engine","root":"/cache/snap"}]}` + "\n"},
		},
		"info": {
			launch: launch{Model: "org/tiny"}, loaded: true, path: "/info",
			want: answer{200, `{"model_id":"org/tiny"}` + "\n"},
		},
		"get_model_info": {
			launch: launch{Model: "org/tiny"}, loaded: true, path: "/get_model_info",
			want: answer{200, `{"is_generation":true,"model_path":"org/tiny","tokenizer_path":"org/tiny"}` + "\n"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := &server{launch: tc.launch}
			if tc.loaded {
				s.model.Store(&model{Dir: "/cache/snap"})
			}
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			rec := httptest.NewRecorder()
			s.routes().ServeHTTP(rec, httptest.NewRequest(method, tc.path, nil))
			got := answer{rec.Code, rec.Body.String()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}
