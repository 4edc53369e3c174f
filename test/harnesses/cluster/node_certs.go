package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/certs"
)

// nodePKI is the real node's certificates: a CA of its own that signs the
// kubelet's serving certificate (which kube-apiserver checks when it
// connects for logs, exec and port-forward) and the client certificate
// kube-apiserver presents to the kubelet (which the kubelet checks).
type nodePKI struct {
	caFile                    string
	kubeletCert, kubeletKey   string
	apiserverCert, apiserverK string
}

// kubeletClientUser is the user kube-apiserver is to the kubelet: in
// system:masters, so that the kubelet's webhook authorization (a
// SubjectAccessReview) allows it to read logs and exec, as kubeadm's
// apiserver-kubelet-client is allowed by its binding.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// certLifetime is long enough for any session.
const certLifetime = 7 * 24 * time.Hour

// writeNodePKI writes the node's CA and certificates into dir.
func writeNodePKI(dir, nodeName string) (*nodePKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	now := time.Now()
	ca, err := certs.NewCA("modelgate-node-ca", now, certLifetime)
	if err != nil {
		return nil, err
	}
	serving, err := certs.NewServing(ca, []string{nodeName, "localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, now, certLifetime)
	if err != nil {
		return nil, err
	}
	client, err := certs.NewClient(ca, kubeletClientUser, []string{"system:masters"}, now, certLifetime)
	if err != nil {
		return nil, err
	}
	p := &nodePKI{
		caFile:        filepath.Join(dir, "ca.crt"),
		kubeletCert:   filepath.Join(dir, "kubelet.crt"),
		kubeletKey:    filepath.Join(dir, "kubelet.key"),
		apiserverCert: filepath.Join(dir, "apiserver-kubelet-client.crt"),
		apiserverK:    filepath.Join(dir, "apiserver-kubelet-client.key"),
	}
	for path, b := range map[string][]byte{
		p.caFile: ca.CertPEM, p.kubeletCert: serving.CertPEM, p.kubeletKey: serving.KeyPEM,
		p.apiserverCert: client.CertPEM, p.apiserverK: client.KeyPEM,
	} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return p, nil
}

// configureAPIServerForNode makes kube-apiserver reach the kubelet as a
// cluster's does: at the node's InternalIP (127.0.0.1) first, checking the
// kubelet's certificate against the node CA, with a client certificate
// the kubelet trusts.
func configureAPIServerForNode(te *envtest.Environment, p *nodePKI) {
	args := te.ControlPlane.GetAPIServer().Configure()
	args.Set("kubelet-certificate-authority", p.caFile)
	args.Set("kubelet-client-certificate", p.apiserverCert)
	args.Set("kubelet-client-key", p.apiserverK)
	args.Set("kubelet-preferred-address-types", "InternalIP", "Hostname")
}
