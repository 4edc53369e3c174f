package main

import (
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/modelgate/modelgate/certs"
)

// writeCertificate writes a serving certificate for 127.0.0.1 (tls.crt,
// tls.key), made as modelgate's self mode makes its own, into dir, and
// returns a pool trusting its CA.
func writeCertificate(dir string) (*x509.CertPool, error) {
	now := time.Now()
	ca, err := certs.NewCA("bench-http", now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	serving, err := certs.NewServing(ca, nil, []net.IP{net.ParseIP("127.0.0.1")}, now, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), serving.CertPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), serving.KeyPEM, 0o600); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return pool, nil
}
