package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// This file is the stand-in for Triton Inference Server: `tritonserver
// --model-repository DIR` (src/command_line_parser.cc), which loads every
// model of its repositories and answers KServe's v2 health endpoints.

// parseTriton parses tritonserver's arguments: --model-repository (or
// --model-store), once or more, --http-port (8000) and --http-address
// (0.0.0.0). Every other option of Triton's takes a value, and is skipped
// with it.
func parseTriton(args []string) (launch, error) {
	const prog = "tritonserver"
	spec := flagSpec{
		prog:   prog,
		valued: setOf("--http-port", "--http-address"),
		repeat: setOf("--model-repository"),
		norm: func(n string) string {
			if n == "--model-store" {
				return "--model-repository"
			}
			return n
		},
	}
	s, err := spec.scan(args)
	if err != nil {
		return launch{}, err
	}
	if len(s.pos) > 0 {
		return launch{}, usage(prog, "unexpected argument %q", s.pos[0])
	}
	repos := s.flags["--model-repository"]
	if len(repos) == 0 {
		return launch{}, usage(prog, "the stand-in needs --model-repository")
	}
	port, err := parsePort(prog, "--http-port", s.last("--http-port"), 8000)
	if err != nil {
		return launch{}, err
	}
	host := s.last("--http-address")
	if host == "" {
		host = "0.0.0.0"
	}
	return launch{Engine: engineTriton, Repositories: repos, Host: host, Port: port}, nil
}

// tritonSkipped are the directories of a repository Triton does not take
// for models (model_repository_manager.cc, PollAndUpdateInternal). Every
// other directory is a model, hidden ones too.
var tritonSkipped = setOf("op_defs", "graphs", "resource")

// tritonModel is a model of a repository, read.
type tritonModel struct {
	Versions []string
	Files    int
	Bytes    int64
}

// tritonServer answers Triton's endpoints: 400 (not 503) until every
// model is loaded, as HandleServerHealth does under --strict-readiness.
type tritonServer struct {
	models atomic.Pointer[map[string]tritonModel] // nil while loading
}

func (s *tritonServer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(tritonStatus(s.models.Load() != nil))
	})
	mux.HandleFunc("GET /v2/models/{name}/ready", func(w http.ResponseWriter, r *http.Request) {
		_, ok := s.model(r.PathValue("name"))
		w.WriteHeader(tritonStatus(ok))
	})
	mux.HandleFunc("GET /v2/models/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		m, ok := s.model(name)
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Request for unknown model: '" + name + "' is not found"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "versions": m.Versions})
	})
	return mux
}

// model returns a loaded model.
func (s *tritonServer) model(name string) (tritonModel, bool) {
	all := s.models.Load()
	if all == nil {
		return tritonModel{}, false
	}
	m, ok := (*all)[name]
	return m, ok
}

// tritonStatus is Triton's answer: 200 when ready, else 400.
func tritonStatus(ready bool) int {
	if ready {
		return http.StatusOK
	}
	return http.StatusBadRequest
}

// runTriton runs tritonserver: it listens, then reads every model of the
// repositories; if one fails, it exits 1 as Triton does with its default
// --exit-on-error.
func runTriton(ctx context.Context, l launch, p proc) int {
	delay, ok := startDelay(p)
	if !ok {
		return 2
	}
	s := &tritonServer{}
	srv := listenAt(l, l.Host, l.Port, s.routes(), p)
	if srv == nil {
		return 1
	}
	defer srv.shutdown(p)
	if err := p.wait(ctx, delay); err != nil {
		return 0
	}
	models, err := readRepositories(ctx, l.Repositories, p.stdout)
	if ctx.Err() != nil {
		return 0
	}
	if err != nil {
		fail(p, l, err)
		fmt.Fprintln(p.stderr, "error: creating server: Internal - failed to load all models")
		return 1
	}
	s.models.Store(&models)
	fmt.Fprintf(p.stdout, "engine: loaded %d models: %s\n", len(models), strings.Join(slices.Sorted(maps.Keys(models)), ", "))
	return srv.wait(ctx, p)
}

// readRepositories reads every model of the repositories.
func readRepositories(ctx context.Context, repos []string, log io.Writer) (map[string]tritonModel, error) {
	models := map[string]tritonModel{}
	var errs []error
	for _, repo := range repos {
		entries, err := os.ReadDir(repo)
		if err != nil {
			return nil, fmt.Errorf("model repository %s: %w", repo, err)
		}
		for _, e := range entries {
			name := e.Name()
			if tritonSkipped[name] || !isDir(filepath.Join(repo, name)) {
				continue
			}
			if _, dup := models[name]; dup {
				errs = append(errs, fmt.Errorf("failed to load '%s': the model is in more than one repository", name))
				continue
			}
			m, err := readTritonModel(ctx, filepath.Join(repo, name), name, log)
			if err != nil {
				errs = append(errs, fmt.Errorf("failed to load '%s': %w", name, err))
				continue
			}
			models[name] = m
		}
	}
	return models, errors.Join(errs...)
}

// readTritonModel reads every file under a model's directory (safetensors
// files are checked, as the engine reads them); the model needs a version,
// a directory named by a number.
func readTritonModel(ctx context.Context, dir, name string, log io.Writer) (tritonModel, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return tritonModel{}, err
	}
	var m tritonModel
	for _, e := range entries {
		if _, err := strconv.ParseUint(e.Name(), 10, 63); err == nil && isDir(filepath.Join(dir, e.Name())) {
			m.Versions = append(m.Versions, e.Name())
		}
	}
	if len(m.Versions) == 0 {
		return tritonModel{}, fmt.Errorf("at least one version must be available under the version policy of model '%s'", name)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		var size int64
		if strings.HasSuffix(path, ".safetensors") {
			_, size, err = readSafetensors(ctx, path)
		} else {
			size, err = readAll(path)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		m.Files++
		m.Bytes += size
		fmt.Fprintf(log, "engine: read %s/%s: %d bytes\n", name, rel, size)
		return nil
	})
	return m, err
}

// readAll reads a file to its end and returns its size.
func readAll(path string) (int64, error) {
	f, err := os.Open(path) //nolint:gosec // a file of the model repository the server serves, as the real server reads it
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(io.Discard, f)
}
