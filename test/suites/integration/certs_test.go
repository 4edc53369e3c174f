package integration_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/gomega"
)

// writeServingCert writes a self-signed serving certificate for 127.0.0.1
// into dir as tls.crt and tls.key, replacing any there atomically (as a
// Secret volume update does), and returns its serial number.
func writeServingCert(dir string) *big.Int {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	Expect(err).NotTo(HaveOccurred())
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "modelgate-test"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	write := func(name string, block *pem.Block) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		Expect(os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600)).To(Succeed())
		Expect(os.Rename(tmp, filepath.Join(dir, name))).To(Succeed())
	}
	write("tls.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	write("tls.crt", &pem.Block{Type: "CERTIFICATE", Bytes: der})
	return serial
}
