package main

import (
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewRegistry(t *testing.T) {
	tests := map[string]struct {
		backend string
		env     env
		wantDir string
		wantErr error
	}{
		"file in DYN_FILE_KV":    {backend: "file", env: env{"DYN_FILE_KV": "/kv"}, wantDir: "/kv/modelgate-standin/workers"},
		"file in TMPDIR":         {backend: "file", env: env{"TMPDIR": "/t"}, wantDir: "/t/dynamo_store_kv/modelgate-standin/workers"},
		"file in /tmp":           {backend: "file", wantDir: "/tmp/dynamo_store_kv/modelgate-standin/workers"},
		"mem: this process":      {backend: "mem"},
		"etcd is not here":       {backend: "etcd", wantErr: errNoDiscovery},
		"kubernetes is not here": {backend: "kubernetes", wantErr: errNoDiscovery},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := newRegistry(tc.backend, tc.env)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err == nil && r.dir != tc.wantDir {
				t.Errorf("dir %q, want %q", r.dir, tc.wantDir)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	r, err := newRegistry("file", env{"DYN_FILE_KV": t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.workers(); err != nil || len(got) != 0 {
		t.Fatalf("workers before any registered = %v, %v; want none", got, err)
	}
	a, err := r.register([]string{"org/a"}, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.register([]string{"b", "c"}, "/b"); err != nil {
		t.Fatal(err)
	}
	if err := r.unregister(a); err != nil {
		t.Fatal(err)
	}
	got, err := r.workers()
	if err != nil {
		t.Fatal(err)
	}
	d := &discovered{workers: got}
	if diff := cmp.Diff(map[string]string{"b": "/b", "c": "/b"}, d.models()); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

// A worker registers once its model is read and is unregistered when it
// stops; the frontend follows.
func TestDynamoWorkerAndFrontend(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	dir := t.TempDir()
	cache := filepath.Join(dir, "hub")
	writeSnapshot(t, cache, "Qwen/Qwen3-0.6B", commit, tinyModel(t))
	writeRef(t, cache, "Qwen/Qwen3-0.6B", "main", commit)
	e := env{"HF_HUB_CACHE": cache, "DYN_FILE_KV": filepath.Join(dir, "kv"), "DYN_DISCOVERY_BACKEND": "file"}

	f := startEngine(t, engineDynamoFrontend, []string{"python3", "-m", "dynamo.frontend", "--http-port", "0"}, e, nil)
	awaitStatus(t, f, f.base+"/health", http.StatusOK)
	if code, _ := answer(t, f.base+"/v1/models/Qwen/Qwen3-0.6B/ready"); code != http.StatusServiceUnavailable {
		t.Errorf("a model no worker serves: ready = %d, want 503", code)
	}
	if code, _ := answer(t, f.base+"/v1/models/Qwen/Qwen3-0.6B/other"); code != http.StatusNotFound {
		t.Errorf("an unknown path under a model = %d, want 404", code)
	}
	w := startEngine(t, engineDynamoWorker, []string{"python3", "-m", "dynamo.sglang", "--model-path", "Qwen/Qwen3-0.6B", "--served-model-name", "qwen"},
		e.with("DYN_SYSTEM_PORT", "0"), nil)
	awaitStatus(t, w, w.base+"/live", http.StatusOK)
	awaitStatus(t, f, f.base+"/v1/models/qwen/ready", http.StatusOK)
	if _, body := answer(t, f.base+"/v1/models"); !strings.Contains(body, `"id":"qwen"`) {
		t.Errorf("/v1/models = %s, want qwen listed", body)
	}
	w.stop(t)
	awaitStatus(t, f, f.base+"/v1/models/qwen/ready", http.StatusServiceUnavailable)
	if code, _ := answer(t, f.base+"/health"); code != http.StatusOK {
		t.Errorf("/health without workers = %d, want 200", code)
	}
}

func TestDynamoNoEtcd(t *testing.T) {
	var out strings.Builder
	code := dispatch(t.Context(), []string{"python3", "-m", "dynamo.frontend"}, proc{env: env{}, stdout: &out, stderr: &out})
	if code != 1 || !strings.Contains(out.String(), "use --discovery-backend file") {
		t.Errorf("exit %d, output %q; want 1 and what to use instead of etcd", code, out.String())
	}
}
