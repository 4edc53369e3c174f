package certmanager_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// startAPIServer starts etcd and kube-apiserver with its cluster network
// (webhook and conversion calls to Services) through proxy, and returns
// it, an administrator's configuration and kubeconfig file.
func startAPIServer(t *testing.T, root, dir string, proxy *certmanager.ServiceProxy) (*envtest.Environment, *rest.Config, string) {
	t.Helper()
	assets, err := env.AssetsDir(root)
	if err != nil {
		t.Fatal(err)
	}
	egress := filepath.Join(dir, "egress-selector.yaml")
	writeFile(t, egress, []byte(proxy.EgressSelectorConfig()))
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	te.ControlPlane.GetAPIServer().Configure().Append("egress-selector-config-file", egress)
	if _, err := te.Start(); err != nil {
		t.Fatalf("starting etcd and kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping etcd and kube-apiserver: %v", err)
		}
	})
	u, err := te.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := cluster.WriteKubeconfig(u, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return te, u.Config(), kubeconfig
}

// addServiceAccountUser returns a kubeconfig file authenticating as
// modelgate's service account in namespace, which the chart binds its
// roles to, once the API server grants it what the release's manifest
// binds it.
func addServiceAccountUser(ctx context.Context, t *testing.T, te *envtest.Environment, c client.Client, manifest []*unstructured.Unstructured, path string) {
	t.Helper()
	name, groups := "system:serviceaccount:"+env.Namespace+":"+env.ServiceAccount, env.ServiceAccountGroups(env.Namespace)
	if err := env.WaitForPermissions(ctx, c, name, groups, manifest); err != nil {
		t.Fatal(err)
	}
	u, err := te.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.WriteKubeconfig(u, path); err != nil {
		t.Fatal(err)
	}
}

// helm runs the helm binary against the cluster of kubeconfig.
func helm(t *testing.T, kubeconfig string, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(*helmBinary, append(args, "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// decodeManifest splits helm's manifest into objects.
func decodeManifest(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(string(b), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("decoding the release's manifest: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// newClient is an administrator's client knowing Kubernetes', the CRDs'
// and cert-manager's kinds.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := certmanager.Scheme()
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// modelgateConfiguration writes, to path, the Configuration the release's
// ConfigMap holds with what differs for a process on this machine: the
// webhook served on 127.0.0.1:port from certDir (the Secret's volume),
// health on healthAddr, no metrics, no drain (one replica).
func modelgateConfiguration(ctx context.Context, t *testing.T, c client.Client, path, certDir string, port int32, healthAddr string) *config.Configuration {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "modelgate-config"}, cm); err != nil {
		t.Fatal(err)
	}
	shipped := path + ".shipped"
	writeFile(t, shipped, []byte(cm.Data["configuration.yaml"]))
	cfg, err := config.Load(shipped)
	if err != nil {
		t.Fatalf("the release's Configuration: %v", err)
	}
	if cfg.Certificates.Mode != config.CertificatesCertManager {
		t.Fatalf("the release's certificates.mode is %q, want %q", cfg.Certificates.Mode, config.CertificatesCertManager)
	}
	cfg.Webhook.Host, cfg.Webhook.Port, cfg.Webhook.CertDir = "127.0.0.1", port, certDir
	cfg.Health.BindAddress, cfg.Metrics.BindAddress = healthAddr, "0"
	cfg.DrainPeriod.Duration = 0
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	cfg.RecordKey = nil
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
	return cfg
}

// certificateReady waits until the Certificate is Ready.
func certificateReady(ctx context.Context, t *testing.T, cm *certmanager.CertManager, c client.Client, name string) {
	t.Helper()
	key := client.ObjectKey{Namespace: env.Namespace, Name: name}
	if err := cm.Poll(ctx, time.Minute, "Certificate "+key.String()+" to be Ready", func(ctx context.Context) (bool, error) {
		ready, err := certmanager.Ready(ctx, c, key)
		return ready, client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatal(err)
	}
}

// leaf parses a PEM certificate's first block.
func leaf(pemBytes []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// secretSerial is the serial of the certificate in the Secret's tls.crt.
func secretSerial(ctx context.Context, c client.Client, name string) (string, *corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, s); err != nil {
		return "", nil, err
	}
	crt, err := leaf(s.Data[corev1.TLSCertKey])
	if err != nil {
		return "", nil, fmt.Errorf("Secret %s's %s: %w", name, corev1.TLSCertKey, err)
	}
	return crt.SerialNumber.String(), s, nil
}

// certificate reads a Certificate of the release.
func certificate(ctx context.Context, t *testing.T, c client.Client, name string) *cmv1.Certificate {
	t.Helper()
	got := &cmv1.Certificate{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
