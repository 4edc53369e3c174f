package certmanager

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ServiceProxy is what kube-proxy is to the API server's calls to a
// Service, for components that run here as processes rather than Pods: the
// API server, started with EgressSelectorConfig's file, sends its calls to
// the cluster network (webhooks, CRD conversion) as HTTP CONNECT requests
// to a Service's cluster IP and port, and the proxy joins each to the
// loopback address Route gave for it. A call to any other address is
// refused, as a Service without endpoints is.
type ServiceProxy struct {
	l      net.Listener
	mu     sync.Mutex
	routes map[string]string
	wg     sync.WaitGroup
	joined atomic.Int64
}

// StartServiceProxy listens on the Unix socket at path (the API server
// takes a proxy over TCP only with TLS).
func StartServiceProxy(path string) (*ServiceProxy, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening for the API server's egress: %w", err)
	}
	p := &ServiceProxy{l: l, routes: map[string]string{}}
	srv := &http.Server{Handler: http.HandlerFunc(p.connect), ReadHeaderTimeout: 10 * time.Second}
	p.wg.Go(func() { _ = srv.Serve(l) })
	return p, nil
}

// EgressSelectorConfig is the API server's --egress-selector-config-file:
// the cluster network through the proxy, the rest direct.
func (p *ServiceProxy) EgressSelectorConfig() string {
	return `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: ` + p.l.Addr().String() + `
`
}

// Route sends calls to service (a cluster IP and port) to backend.
func (p *ServiceProxy) Route(service, backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.routes[service] = backend
}

// Connections is the count of connections the proxy has joined to a
// backend: the API server's TLS handshakes with the Services' backends.
func (p *ServiceProxy) Connections() int64 { return p.joined.Load() }

// Close stops listening; the connections it joined end with their peers.
func (p *ServiceProxy) Close() error {
	err := p.l.Close()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// connect joins one CONNECT request to its backend.
func (p *ServiceProxy) connect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	p.mu.Lock()
	backend, ok := p.routes[r.Host]
	p.mu.Unlock()
	if !ok {
		http.Error(w, "no route to "+r.Host, http.StatusBadGateway)
		return
	}
	var d net.Dialer
	up, err := d.DialContext(r.Context(), "tcp", backend)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		_ = up.Close()
		_ = down.Close()
		return
	}
	p.joined.Add(1)
	join(up, down, buf)
}

// join copies both ways until either side closes, then closes both.
func join(up, down net.Conn, buf *bufio.ReadWriter) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = up.Close(); _ = down.Close() }) }
	go func() {
		_, _ = io.Copy(up, buf)
		closeBoth()
	}()
	_, _ = io.Copy(down, up)
	closeBoth()
}
