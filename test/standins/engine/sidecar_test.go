package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// The sidecar answers /health itself, whatever the engine does, and sends
// everything else to the engine on loopback.
func TestSidecar(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "engine "+r.Method+" "+r.URL.Path)
	}))
	defer engine.Close()
	_, port, err := net.SplitHostPort(engine.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for name, secure := range map[string]bool{"plain": false, "TLS, the default": true} {
		t.Run(name, func(t *testing.T) {
			argv := []string{"/app/pd-sidecar", "--port", strconv.Itoa(freeTCPPort(t)), "--model-server-port", port}
			if !secure {
				argv = append(argv, "--secure-proxy=false")
			}
			s := startEngine(t, engineRoutingSidecar, argv, env{}, nil)
			if secure {
				s.base = "https" + s.base[len("http"):]
			}
			if code, _ := answer(t, s.base+"/health"); code != http.StatusOK {
				t.Errorf("/health = %d, want 200 (the engine's is 503)", code)
			}
			if code, body := answer(t, s.base+"/v1/models"); code != http.StatusOK || body != "engine GET /v1/models" {
				t.Errorf("/v1/models = %d %q, want the engine's answer", code, body)
			}
		})
	}
}
