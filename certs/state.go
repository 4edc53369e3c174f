package certs

import (
	"bytes"
	"crypto/x509"
	"time"
)

// The keys of the Secret. tls.crt, tls.key and ca.crt are the names
// cert-manager and kubernetes.io/tls Secrets use, so tools read it alike.
const (
	// KeyServingCert and KeyServingKey are the serving certificate and key.
	KeyServingCert = "tls.crt"
	KeyServingKey  = "tls.key"
	// KeyCABundle holds every CA the webhook clients must trust, the
	// current signer first: what is injected as caBundle.
	KeyCABundle = "ca.crt"
	// KeyCAKey is the current signer's private key.
	KeyCAKey = "ca.key"
)

// State is what the Secret holds, parsed. A part that is missing or does
// not parse is nil, and is created again.
type State struct {
	// CA is the current signer: the bundle's first certificate with its key.
	CA *KeyPair
	// Bundle is every CA to trust, current signer first.
	Bundle []*x509.Certificate
	// Serving is the certificate the replicas serve.
	Serving *KeyPair
}

// ReadState parses a Secret's data.
func ReadState(data map[string][]byte) *State {
	s := &State{}
	if bundle, err := ParseCertificates(data[KeyCABundle]); err == nil {
		s.Bundle = bundle
		if ca, err := ParseKeyPair(EncodeCertificates(bundle[:1]), data[KeyCAKey]); err == nil && ca.Cert.IsCA {
			s.CA = ca
		}
	}
	if kp, err := ParseKeyPair(data[KeyServingCert], data[KeyServingKey]); err == nil {
		s.Serving = kp
	}
	return s
}

// Data is the Secret data for s.
func (s *State) Data() map[string][]byte {
	d := map[string][]byte{}
	if len(s.Bundle) > 0 {
		d[KeyCABundle] = EncodeCertificates(s.Bundle)
	}
	if s.CA != nil {
		d[KeyCAKey] = s.CA.KeyPEM
	}
	if s.Serving != nil {
		d[KeyServingCert] = s.Serving.CertPEM
		d[KeyServingKey] = s.Serving.KeyPEM
	}
	return d
}

// withCA returns s with ca as the signer, at the head of the bundle,
// followed by the CAs of the old bundle still valid at now.
func (s *State) withCA(ca *KeyPair, now time.Time) *State {
	bundle := []*x509.Certificate{ca.Cert}
	for _, c := range s.Bundle {
		if now.Before(c.NotAfter) && !bytes.Equal(c.Raw, ca.Cert.Raw) {
			bundle = append(bundle, c)
		}
	}
	return &State{CA: ca, Bundle: bundle, Serving: s.Serving}
}

// MergeBundles is every certificate of a, then those of b not in a, leaving
// out the expired ones: the bundle to inject where b is already injected,
// so that a replica with an older Secret never takes a newer CA away.
func MergeBundles(a, b []*x509.Certificate, now time.Time) []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range append(append([]*x509.Certificate(nil), a...), b...) {
		if !now.Before(c.NotAfter) {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || bytes.Equal(o.Raw, c.Raw)
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out
}
