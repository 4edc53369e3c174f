package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/certs"
)

// clientAuth lets only callers with a client certificate that
// webhook.clientCAFile's bundle signed talk to the webhook server: the API
// server, given such a certificate in its admission configuration. Anyone
// else is refused in the TLS handshake, before a byte of their request is
// read, so no AdmissionReview of theirs is decoded or judged. The check is
// per connection and covers every path of the port: /mutate, /validate,
// the WorkloadPolicy and exception webhooks, the AIInference webhooks and
// /convert.
//
// The webhook server's readiness check dials the port too. It presents a
// certificate of its own (probe), signed by a CA made when modelgate
// starts and trusted beside the bundle; that CA's key is dropped once it
// has signed, and the probe's key never leaves the process. Without it,
// every readiness probe would be a refused handshake in the log.
type clientAuth struct {
	// bundle is webhook.clientCAFile's, read again when the file changes.
	bundle *dynamiccertificates.DynamicFileCAContent
	// probe is the readiness check's certificate; probeCA signed it.
	probe   tls.Certificate
	probeCA *x509.Certificate
	// pool is the bundle's CAs and probeCA, built again when the bundle
	// changes.
	pool atomic.Pointer[clientCAPool]
}

// clientCAPool is the pool the handshakes verify with, and the bundle's
// pool it was built from.
type clientCAPool struct {
	bundle, pool *x509.CertPool
}

var _ manager.LeaderElectionRunnable = (*clientAuth)(nil)

// webhookClientCAName names webhook.clientCAFile's bundle in the logs of
// the Kubernetes code that reloads it.
const webhookClientCAName = "webhook-client-ca"

// probeName is the readiness check's certificate's subject and its CA's.
const probeName = "modelgate-webhook-readiness"

// probeLifetime is how long the readiness check's certificate is valid:
// longer than any process runs, as it is made anew at each start.
const probeLifetime = 100 * 365 * 24 * time.Hour

// newClientAuth reads webhook.clientCAFile; nil without one.
func newClientAuth(w config.WebhookServer, now time.Time) (*clientAuth, error) {
	if w.ClientCAFile == "" {
		return nil, nil
	}
	bundle, err := dynamiccertificates.NewDynamicCAContentFromFile(webhookClientCAName, w.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("webhook.clientCAFile %s: %w", w.ClientCAFile, err)
	}
	ca, err := certs.NewCA(probeName, now, probeLifetime)
	if err != nil {
		return nil, fmt.Errorf("creating the readiness check's CA: %w", err)
	}
	kp, err := certs.NewClient(ca, probeName, nil, now, probeLifetime)
	if err != nil {
		return nil, fmt.Errorf("creating the readiness check's certificate: %w", err)
	}
	probe, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the readiness check's certificate: %w", err)
	}
	return &clientAuth{bundle: bundle, probe: probe, probeCA: ca.Cert}, nil
}

// clientCAs is the pool a handshake verifies the caller's certificate
// with: the bundle in force and the readiness check's CA.
func (a *clientAuth) clientCAs() *x509.CertPool {
	// The bundle was read when a was made, so there are always options.
	opts, _ := a.bundle.VerifyOptions()
	if p := a.pool.Load(); p != nil && p.bundle == opts.Roots {
		return p.pool
	}
	pool := opts.Roots.Clone()
	pool.AddCert(a.probeCA)
	a.pool.Store(&clientCAPool{bundle: opts.Roots, pool: pool})
	return pool
}

// tlsOption makes the server require a client certificate and verify it
// against the bundle in force at each handshake. The configuration of a
// handshake is the server's as the other options and controller-runtime
// leave it (the serving certificate is set after the options run), taken
// when the handshake starts.
func (a *clientAuth) tlsOption(c *tls.Config) {
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = a.clientCAs()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		hs := c.Clone()
		hs.GetConfigForClient = nil
		hs.ClientCAs = a.clientCAs()
		// A resumed session skips the certificate check: a CA taken out of
		// the bundle must stop letting its certificates in. The API server
		// keeps its connections open, so it seldom shakes hands again.
		hs.SessionTicketsDisabled = true
		return hs, nil
	}
}

// Start reads webhook.clientCAFile again whenever it changes, until ctx
// ends: a rotated CA is trusted without a restart. It runs on every
// replica, as the webhook server does.
func (a *clientAuth) Start(ctx context.Context) error {
	a.bundle.Run(ctx, 1)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (*clientAuth) NeedLeaderElection() bool { return false }

// startedChecker is the webhook server's readiness check: a TLS handshake
// on its port with the probe's certificate, where controller-runtime's
// check makes one without a certificate.
func (a *clientAuth) startedChecker(w config.WebhookServer) healthz.Checker {
	addr := net.JoinHostPort(w.Host, strconv.Itoa(int(w.Port)))
	// As controller-runtime's check, it asks whether the port serves, not
	// who serves it: the serving certificate is not verified.
	tc := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{a.probe}} //nolint:gosec // see above.
	return func(*http.Request) error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tc)
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		if err := conn.Close(); err != nil {
			return fmt.Errorf("webhook server is not reachable: closing connection: %w", err)
		}
		return nil
	}
}

// clientAuthServer is the webhook server with client authentication on:
// its readiness check presents the probe's certificate.
type clientAuthServer struct {
	crwebhook.Server
	started healthz.Checker
}

// StartedChecker implements crwebhook.Server.
func (s clientAuthServer) StartedChecker() healthz.Checker { return s.started }

// withClientAuth returns the webhook server, its readiness check
// presenting the probe's certificate when a is not nil.
func withClientAuth(srv crwebhook.Server, a *clientAuth, w config.WebhookServer) crwebhook.Server {
	if a == nil {
		return srv
	}
	return clientAuthServer{Server: srv, started: a.startedChecker(w)}
}

// addClientAuth runs a's file watch with the manager; nothing when a is
// nil.
func addClientAuth(mgr manager.Manager, a *clientAuth) error {
	if a == nil {
		return nil
	}
	if err := mgr.Add(a); err != nil {
		return fmt.Errorf("adding the webhook client CA watch: %w", err)
	}
	return nil
}
