package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/certs"
)

// clientAuthTestServer is a webhook server as NewManager builds it with
// webhook.clientCAFile set (the configured TLS options, the client
// authentication, controller-runtime's server behind the request limits),
// serving /ping, which counts its calls.
type clientAuthTestServer struct {
	auth   *clientAuth
	w      config.WebhookServer
	roots  *x509.CertPool // trusts the serving certificate
	served atomic.Int64
	ready  func() error
}

// startClientAuthServer serves until the test ends, with the client CA
// bundle in caFile, and returns once the readiness check passes.
func startClientAuthServer(t *testing.T, caFile string) *clientAuthTestServer {
	t.Helper()
	now := time.Now()
	servingCA, err := certs.NewCA("serving-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := certs.NewServing(servingCA, nil, []net.IP{net.IPv4(127, 0, 0, 1)}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := config.New()
	cfg.Webhook.Host, cfg.Webhook.Port, cfg.Webhook.CertDir = "127.0.0.1", int32(port), dir
	cfg.Webhook.ClientCAFile = caFile

	auth, err := newClientAuth(cfg.Webhook, now)
	if err != nil {
		t.Fatal(err)
	}
	s := &clientAuthTestServer{auth: auth, w: cfg.Webhook, roots: x509.NewCertPool()}
	s.roots.AddCert(servingCA.Cert)
	srv := withClientAuth(newWebhookServer(cfg, &drain{}, []func(*tls.Config){TLSOptions(cfg.Webhook), auth.tlsOption}), auth, cfg.Webhook)
	srv.Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.served.Add(1)
		_, _ = io.WriteString(w, "pong")
	}))
	ready := srv.StartedChecker()
	s.ready = func() error { return ready(nil) }
	if err := ready(nil); err == nil {
		t.Fatal("the readiness check passed before the server started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for s.ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook server's readiness check still fails: %v", s.ready())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// ping calls /ping on a new connection, presenting cert when it is not
// nil, and returns the answer's body or the error. The certificate is sent
// whatever CAs the server says it accepts (Go's client would keep back
// one they did not sign, and the server would never see it).
func (s *clientAuthTestServer) ping(cert *tls.Certificate) (string, error) {
	tc := &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	resp, err := c.Get("https://" + net.JoinHostPort(s.w.Host, strconv.Itoa(int(s.w.Port))) + "/ping")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// handshake makes a TLS handshake with the server, presenting cert when
// it is not nil (whatever CAs the server says it accepts), sends nothing
// else, and returns how the server ends it: with TLS 1.3 the client's side
// of the handshake is over first, and the server's verdict on the
// certificate is the next thing it sends. A server that accepts the
// certificate waits for a request: the read times out.
func (s *clientAuthTestServer) handshake(cert *tls.Certificate) error {
	tc := &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort(s.w.Host, strconv.Itoa(int(s.w.Port))), tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

// tlsRefusal reports whether err is the server's TLS alert: a refusal in
// the handshake, not an HTTP answer.
func tlsRefusal(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// keyPair is kp as a certificate a TLS client presents.
func keyPair(t *testing.T, kp *certs.KeyPair) *tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

func writeCABundle(t *testing.T, file string, cas ...*certs.KeyPair) {
	t.Helper()
	var pem []byte
	for _, ca := range cas {
		pem = append(pem, ca.CertPEM...)
	}
	if err := os.WriteFile(file, pem, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClientAuth: with webhook.clientCAFile, a client certificate the
// bundle signed gets its answer; no certificate, one of another CA, one
// of the bundle's CA but not for client authentication, and an expired
// one are refused in the TLS handshake, and no handler runs for them.
func TestClientAuth(t *testing.T) {
	now := time.Now()
	ca, err := certs.NewCA("api-server-client-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("another-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeCABundle(t, caFile, ca)
	s := startClientAuthServer(t, caFile)

	client := func(ca *certs.KeyPair, issued time.Time) *tls.Certificate {
		kp, err := certs.NewClient(ca, "kube-apiserver", nil, issued, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return keyPair(t, kp)
	}
	servingOnly, err := certs.NewServing(ca, []string{"kube-apiserver"}, nil, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cert *tls.Certificate
		want bool
	}{
		"signed by the bundle's CA":                         {cert: client(ca, now), want: true},
		"no certificate":                                    {},
		"signed by another CA":                              {cert: client(other, now)},
		"the bundle's CA, not for client authentication":    {cert: keyPair(t, servingOnly)},
		"the bundle's CA, expired":                          {cert: client(ca, now.Add(-2*time.Hour))},
		"the readiness check's, which only modelgate holds": {cert: &s.auth.probe, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			before := s.served.Load()
			body, err := s.ping(tc.cert)
			if tc.want {
				if err != nil || body != "pong" {
					t.Errorf("ping = %q, %v; want pong", body, err)
				}
				return
			}
			if err == nil {
				t.Errorf("ping = %q; want no answer", body)
			}
			if s.served.Load() != before {
				t.Errorf("the handler ran for a refused caller")
			}
			if err := s.handshake(tc.cert); !tlsRefusal(err) {
				t.Errorf("handshake: %v; want a TLS alert from the server", err)
			}
		})
	}
}

// TestClientAuthReload: a changed webhook.clientCAFile is in force from the
// next handshake: the new CA's certificates get in, the old CA's no longer
// do; a file that no longer holds a bundle leaves the last one in force.
func TestClientAuthReload(t *testing.T) {
	now := time.Now()
	oldCA, err := certs.NewCA("old-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := certs.NewCA("new-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	writeCABundle(t, caFile, oldCA)
	s := startClientAuthServer(t, caFile)
	cert := func(ca *certs.KeyPair) *tls.Certificate {
		kp, err := certs.NewClient(ca, "kube-apiserver", nil, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return keyPair(t, kp)
	}
	oldCert, newCert := cert(oldCA), cert(newCA)
	check := func(step string, c *tls.Certificate, want bool) {
		t.Helper()
		if want {
			if body, err := s.ping(c); err != nil || body != "pong" {
				t.Errorf("%s: ping = %q, %v; want pong", step, body, err)
			}
		} else if err := s.handshake(c); !tlsRefusal(err) {
			t.Errorf("%s: handshake: %v; want a TLS alert from the server", step, err)
		}
	}
	check("before the change, the old CA's certificate", oldCert, true)
	check("before the change, the new CA's certificate", newCert, false)

	writeCABundle(t, caFile, newCA)
	// What the file watch (Start) does on a change, without waiting for it.
	if err := s.auth.bundle.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	check("after the change, the old CA's certificate", oldCert, false)
	check("after the change, the new CA's certificate", newCert, true)
	if err := s.ready(); err != nil {
		t.Errorf("readiness after the change: %v", err)
	}

	if err := os.WriteFile(caFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.auth.bundle.RunOnce(context.Background()); err == nil {
		t.Error("an empty file loaded as a bundle")
	}
	check("with an empty file, the new CA's certificate", newCert, true)
	check("with an empty file, no certificate", nil, false)
}

// TestNewClientAuth: no file, no client authentication; a file that cannot
// be read stops the start with an error naming the field.
func TestNewClientAuth(t *testing.T) {
	if a, err := newClientAuth(config.WebhookServer{}, time.Now()); a != nil || err != nil {
		t.Errorf("newClientAuth without a file = %v, %v; want nil, nil", a, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.crt")
	_, err := newClientAuth(config.WebhookServer{ClientCAFile: missing}, time.Now())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want one wrapping fs.ErrNotExist", err)
	}
	if err == nil || !strings.Contains(err.Error(), "webhook.clientCAFile") {
		t.Errorf("err = %v, want one naming webhook.clientCAFile", err)
	}
}
