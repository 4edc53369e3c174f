package imagebuild

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// MozillaRoots returns the CA bundle of the image in PEM: Mozilla's NSS trust
// store as golang.org/x/crypto/x509roots/fallback/bundle embeds it, at the
// version go.mod pins (update that module to update the roots). Each
// certificate is preceded by a comment line with its subject.
//
// A root that NSS trusts only with a constraint (a distrust-after date) is
// left out: a PEM file cannot carry the constraint, and trusting the root
// without it would trust what Mozilla distrusts.
func MozillaRoots() ([]byte, error) {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		cert, err := x509.ParseCertificate(root.Certificate)
		if err != nil {
			return nil, fmt.Errorf("parsing a root of golang.org/x/crypto/x509roots/fallback: %w", err)
		}
		fmt.Fprintf(&buf, "# %s\n", cert.Subject)
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("golang.org/x/crypto/x509roots/fallback has no unconstrained root")
	}
	return buf.Bytes(), nil
}

// ParseCABundle parses a PEM bundle of certificates. Anything but
// CERTIFICATE blocks, or a block that does not parse, is an error, so is a
// bundle with no certificate.
func ParseCABundle(pemBytes []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := pemBytes
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("CA bundle: block %d is a %q, not a CERTIFICATE", len(certs)+1, block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("CA bundle: certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("CA bundle: no PEM certificate in it")
	}
	return certs, nil
}

func checkCABundle(pemBytes []byte) error {
	_, err := ParseCABundle(pemBytes)
	return err
}
