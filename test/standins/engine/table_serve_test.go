package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/modelgate/internal/enginefacts"
)

// started is an engine run in this process by dispatch.
type started struct {
	base   string // http(s)://127.0.0.1:port
	cancel context.CancelFunc
	exited chan int
	mu     sync.Mutex
	log    strings.Builder // stdout and stderr
}

// output is what the engine printed so far.
func (s *started) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// startEngine runs argv in this process with e, held before its load
// until hold is closed (nil: not held), and waits until it listens.
func startEngine(t *testing.T, name string, argv []string, e env, hold <-chan struct{}) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{cancel: cancel, exited: make(chan int, 1)}
	outR, outW := io.Pipe()
	errW := writerFunc(func(b []byte) (int, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.log.Write(b)
	})
	go func() {
		s.exited <- dispatch(ctx, argv, proc{env: e, stdout: outW, stderr: errW, hold: hold})
		_ = outW.Close()
	}()
	listening := make(chan string, 1)
	go func() {
		for sc := bufio.NewScanner(outR); sc.Scan(); {
			line := sc.Text()
			_, _ = errW.Write([]byte(line + "\n"))
			if addr, ok := strings.CutPrefix(line, "engine: "+name+" listening on "); ok {
				listening <- addr
			}
		}
	}()
	t.Cleanup(func() { s.stop(t) })
	select {
	case addr := <-listening:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		s.base = "http://" + net.JoinHostPort("127.0.0.1", port)
	case code := <-s.exited:
		s.exited <- code
		t.Fatalf("%q exited %d before listening:\n%s", argv, code, s.output())
	}
	return s
}

// stop stops the engine (SIGTERM) and checks it exits 0.
func (s *started) stop(t *testing.T) {
	s.cancel()
	if code := <-s.exited; code != 0 {
		t.Errorf("exit status %d after it was stopped, want 0:\n%s", code, s.output())
	}
	s.exited <- 0
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// client is for the engines' endpoints; it trusts any certificate (the
// sidecar's is self-signed).
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // the stand-in sidecar's self-signed certificate
}}

// answer is a GET's status and body.
func answer(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// awaitStatus waits until url answers code.
func awaitStatus(t *testing.T, s *started, url string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		got, body := answer(t, url)
		if got == code {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s = %d %s, want %d:\n%s", url, got, body, code, s.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

var unreadyRE = regexp.MustCompile(`^([0-9]{3})(?: (\{[^}]*\}))?`)

// checkUnready checks what the table says an endpoint answers before the
// engine serves: the status it names (and the fields of the body it
// shows), or, when it names none, not the ready status.
func checkUnready(t *testing.T, url string, p enginefacts.Endpoint) {
	t.Helper()
	code, body := answer(t, url)
	if strings.HasPrefix(p.Unready, "never") {
		if code != p.Ready {
			t.Errorf("%s before the engine serves = %d, want %d (%s)", url, code, p.Ready, p.Unready)
		}
		return
	}
	m := unreadyRE.FindStringSubmatch(p.Unready)
	if m == nil {
		if code == p.Ready {
			t.Errorf("%s before the engine serves = %d, want anything else (%s)", url, code, p.Unready)
		}
		return
	}
	if want, _ := strconv.Atoi(m[1]); code != want {
		t.Errorf("%s before the engine serves = %d %s, want %d (%s)", url, code, body, want, p.Unready)
	}
	if m[2] == "" {
		return
	}
	var want, got map[string]any
	if err := json.Unmarshal([]byte(m[2]), &want); err != nil {
		t.Fatalf("the table's body %s: %v", m[2], err)
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("%s: body %q: %v", url, body, err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s before the engine serves: %q is %v, want %v (%s)", url, k, got[k], v, p.Unready)
		}
	}
}

// servingCommand is the engine's first runnable command of the table with
// its model, a free port on every address, and what it needs to run here:
// Dynamo's file discovery in dir.
func servingCommand(t *testing.T, e enginefacts.Engine, model string, dir string) ([]string, env) {
	t.Helper()
	c := runnable(e)[0]
	var tc tableCase
	for name, cand := range tableCases(t, e, c) {
		if name == "model, port and host" {
			tc = cand
		}
	}
	argv := tc.argv
	if model != modelValue(e) {
		for i, a := range argv {
			if a == modelValue(e) {
				argv[i] = model
			}
		}
	}
	if f := e.FlagsWith(enginefacts.RoleDiscovery); len(f) > 0 {
		argv = append(argv, f[0].Names[0], "file")
	}
	if e.Name == engineRoutingSidecar {
		argv = append(argv, "--model-server-port", strconv.Itoa(freeTCPPort(t)))
	}
	return argv, tc.env.with("DYN_FILE_KV", dir)
}

// Every endpoint of the table answers its ready status once the engine
// serves, and the readiness endpoints answer what the table says before.
func TestTableEndpoints(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	tb := table(t)
	for _, e := range tb.Engines {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cache := filepath.Join(dir, "hub")
			writeSnapshot(t, cache, "org/tiny", commit, tinyModel(t))
			writeRef(t, cache, "org/tiny", "main", commit)
			repo := filepath.Join(dir, "models")
			writeFiles(t, repo, map[string][]byte{"tiny/config.pbtxt": []byte(`backend: "onnxruntime"`),
				"tiny/1/model.safetensors": tinyModel(t)["model.safetensors"]})
			model := "org/tiny"
			if e.Name == engineTriton {
				model = repo
			}
			argv, ev := servingCommand(t, e, model, filepath.Join(dir, "kv"))
			for k, v := range map[string]string{"HF_HUB_CACHE": cache, "HUGGINGFACE_HUB_CACHE": cache, "HF_HUB_OFFLINE": "1", "HOME": dir} {
				ev = ev.with(k, v)
			}
			hold := make(chan struct{})
			s := startEngine(t, e.Name, argv, ev, hold)
			if e.Name == engineRoutingSidecar {
				s.base = strings.Replace(s.base, "http:", "https:", 1) // --secure-proxy's default
			}
			url := func(p enginefacts.Endpoint) string {
				return s.base + strings.ReplaceAll(p.Path, "{model}", "org/tiny")
			}
			for _, p := range e.Endpoints {
				if p.Role == enginefacts.RoleReadiness || p.Role == enginefacts.RoleModelReadiness || strings.HasPrefix(p.Unready, "never") {
					checkUnready(t, url(p), p)
				}
			}
			close(hold)
			if _, ok := e.Endpoint(enginefacts.RoleModelReadiness); ok {
				// A model is ready once a worker serving it registered.
				startWorker(t, tb, e, ev)
			}
			for _, p := range e.Endpoints {
				awaitStatus(t, s, url(p), p.Ready)
				if code, body := answer(t, url(p)); p.Role == enginefacts.RoleModels && !strings.Contains(body, `"id":"org/tiny"`) {
					t.Errorf("%s = %d %s, want the model listed", url(p), code, body)
				}
			}
		})
	}
}

// startWorker starts a worker of e's engine (the table's engine with the
// same annotation and a status port) with e's environment.
func startWorker(t *testing.T, tb *enginefacts.Table, e enginefacts.Engine, ev env) {
	t.Helper()
	for _, w := range tb.Annotated(e.Annotation) {
		if _, ok := w.Variable(enginefacts.RoleStatusPort); ok {
			argv, _ := servingCommand(t, w, "org/tiny", "")
			startEngine(t, w.Name, argv, ev.with("DYN_SYSTEM_PORT", "0"), nil)
			return
		}
	}
	t.Fatalf("no worker of %s in the table", e.Name)
}
