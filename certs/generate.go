package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// KeyPair is a certificate with its private key, parsed and in PEM.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// Valid reports whether kp is a certificate that can be served at now; a
// nil kp is not.
func (kp *KeyPair) Valid(now time.Time) bool {
	return kp != nil && !now.Before(kp.Cert.NotBefore) && now.Before(kp.Cert.NotAfter)
}

// clockSkew backdates NotBefore, so that an API server whose clock is a
// little behind still accepts a certificate issued a moment ago.
const clockSkew = 5 * time.Minute

// NewCA creates a self-signed CA certificate (ECDSA P-256) valid from now
// for lifetime.
func NewCA(commonName string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"modelgate"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tpl, tpl, key, key)
}

// NewServing creates a serving certificate for the DNS names and IP
// addresses, signed by ca, valid from now for lifetime but never beyond
// the CA's own expiry.
func NewServing(ca *KeyPair, dnsNames []string, ips []net.IP, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("a serving certificate needs at least one DNS name or IP address")
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	return issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"modelgate"}},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, lifetime)
}

// NewClient creates a client certificate for user in groups (the
// subject's common name and organizations, as Kubernetes reads them),
// signed by ca, valid from now for lifetime but never beyond the CA's own
// expiry.
func NewClient(ca *KeyPair, user string, groups []string, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	if user == "" {
		return nil, errors.New("a client certificate needs a user name")
	}
	return issue(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now, lifetime)
}

// issue gives tpl a new key, a serial number, a digital-signature key
// usage and a validity from now (backdated by clockSkew) for lifetime,
// but never beyond ca's, and signs it with ca.
func issue(ca *KeyPair, tpl *x509.Certificate, now time.Time, lifetime time.Duration) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the key: %w", err)
	}
	if tpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	tpl.NotBefore = now.Add(-clockSkew)
	tpl.NotAfter = now.Add(lifetime)
	if tpl.NotAfter.After(ca.Cert.NotAfter) {
		tpl.NotAfter = ca.Cert.NotAfter
	}
	tpl.KeyUsage = x509.KeyUsageDigitalSignature
	return sign(tpl, ca.Cert, key, ca.Key)
}

// ParseKeyPair parses a PEM certificate and its PEM EC private key and
// checks that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the private key: %w", err)
	}
	pub, ok := certs[0].PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("the private key does not match the certificate")
	}
	return &KeyPair{Cert: certs[0], Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// ParseCertificates parses every PEM certificate in b; there must be one.
func ParseCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing a certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// EncodeCertificates is the PEM form of certs, in order.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

func sign(tpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the new certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the private key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generating a serial number: %w", err)
	}
	return n, nil
}
