// Package certmanager_test proves the chart's cert-manager mode against
// cert-manager itself: its own controllers and cainjector, built from its
// Go module (test/harnesses/certmanager), on a real kube-apiserver. The
// chart, installed by helm with certificates.mode=cert-manager, gets its
// Certificates issued and its CA injected into the webhook configurations
// and the AIInference CRD's conversion; modelgate, run as a process with
// the release's Configuration and service account, serves the issued
// certificate from the Secret's volume, and the API server's calls reach it
// through the release's Service. Then the serving certificate is rotated
// twice, forced by a short renewBefore, while Pods are created at a steady
// rate: every one must be admitted and injected. `make test-certmanager`
// runs it, with the -modelgate, -helm and -certmanager it builds.
package certmanager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

var (
	modelgateBinary = flag.String("modelgate", "", "the modelgate binary (bin/modelgate)")
	helmBinary      = flag.String("helm", "", "the helm binary (bin/helm-<version>)")
	certManagerDir  = flag.String("certmanager", "", "cert-manager's controllers and CRDs (bin/cert-manager/<version>)")
)

// The release's cert-manager objects (charts/modelgate, cert-manager mode).
const (
	caCertificate      = "modelgate-ca"
	servingCertificate = "modelgate-webhook"
	servingSecret      = "modelgate-webhook-tls"
	webhookService     = "modelgate-webhook"
	// serverName is the name the API server checks modelgate's
	// certificate for: its Service's.
	serverName = webhookService + "." + env.Namespace + ".svc"
	// renewAfter is how long after its issue the serving certificate is
	// renewed once renewBefore is set to its duration less this.
	renewAfter = 10 * time.Second
	// rotations is how many times the serving certificate is replaced
	// under load.
	rotations = 2
	// burst is how many creates waitNewConnection makes at once.
	burst = 32
)

// TestCertManagerMode installs the chart in cert-manager mode with
// cert-manager running, serves it with modelgate, and rotates the serving
// certificate under a steady create load.
func TestCertManagerMode(t *testing.T) {
	logf.SetLogger(logr.Discard())
	for name, f := range map[string]*string{"-modelgate": modelgateBinary, "-helm": helmBinary, "-certmanager": certManagerDir} {
		if *f == "" {
			t.Fatalf("%s is required (make test-certmanager gives it)", name)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Kept when the test fails: the components' logs are there.
	dir, err := os.MkdirTemp("", "modelgate-certmanager-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	proxy, err := certmanager.StartServiceProxy(filepath.Join(dir, "egress.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	te, cfg, kubeconfig := startAPIServer(t, root, dir, proxy)
	// The load's creates are not held back by client-go's default limit
	// (5 per second).
	cfg.QPS, cfg.Burst = 200, 400
	c := newClient(t, cfg)

	start := time.Now()
	cm, err := certmanager.Start(ctx, cfg, certmanager.Options{
		Binary: filepath.Join(*certManagerDir, "certmanager"), CRDs: filepath.Join(*certManagerDir, "crds"),
		Kubeconfig: kubeconfig, Log: filepath.Join(dir, "cert-manager.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cm.Stop(); err != nil {
			t.Errorf("stopping cert-manager: %v", err)
		}
	})
	t.Logf("cert-manager acts %s after its start", time.Since(start).Round(time.Millisecond))

	helm(t, kubeconfig, "install", "modelgate", filepath.Join(root, "charts/modelgate"), "--namespace", env.Namespace,
		"--create-namespace", "--set", "certificates.mode=cert-manager")
	manifest := decodeManifest(t, helm(t, kubeconfig, "get", "manifest", "modelgate", "--namespace", env.Namespace))

	// The Certificates are issued, the serving one by the CA.
	certificateReady(ctx, t, cm, c, caCertificate)
	certificateReady(ctx, t, cm, c, servingCertificate)
	serial, secret, err := secretSerial(ctx, c, servingSecret)
	if err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	checkIssued(t, secret)

	// The cainjector puts the CA in every object of the release asking
	// for it: the webhook configurations and the CRD conversion.
	injected := waitInjected(ctx, t, cm, c, ca)
	t.Logf("CA injected into %v", injected)

	// modelgate, as the Deployment runs it: the release's Configuration
	// and service account, the Secret mounted as a volume; the API server
	// reaches it through the release's Service.
	port, health := freePort(t), freeAddr(t)
	vol, err := certmanager.MountSecret(ctx, c, client.ObjectKey{Namespace: env.Namespace, Name: servingSecret}, filepath.Join(dir, "serving-certs"))
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "configuration.yaml")
	modelgateConfiguration(ctx, t, c, cfgPath, vol.Dir(), port, health)
	mgKubeconfig := filepath.Join(dir, "modelgate.kubeconfig")
	addServiceAccountUser(ctx, t, te, c, manifest, mgKubeconfig)
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: webhookService}, svc); err != nil {
		t.Fatal(err)
	}
	backend := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	for _, p := range svc.Spec.Ports {
		proxy.Route(net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port))), backend)
	}
	mg, err := cluster.StartProcess("modelgate", *modelgateBinary,
		[]string{"serve", "--config", cfgPath, "--kubeconfig", mgKubeconfig}, filepath.Join(dir, "modelgate.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mg.Stop(); err != nil {
			t.Errorf("stopping modelgate: %v", err)
		}
	})
	if err := mg.WaitHTTPOK(ctx, "http://"+health+"/readyz", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitServed(ctx, t, cm, backend, ca, serial)
	waitAdmits(ctx, t, c)
	converts(ctx, t, c, root, "converted-first")

	// The rotation: renewBefore set to the duration less renewAfter, so
	// that each serving certificate is renewed renewAfter after its issue,
	// while Pods are created at a steady rate.
	load := startLoad(ctx, c)
	cert := certificate(ctx, t, c, servingCertificate)
	before := cert.DeepCopy()
	renewBefore := cert.Spec.Duration.Duration - renewAfter
	cert.Spec.RenewBefore = &metav1.Duration{Duration: renewBefore}
	if err := c.Patch(ctx, cert, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	t.Logf("Certificate %s: renewBefore %s (duration %s)", servingCertificate, renewBefore, cert.Spec.Duration.Duration)
	serials := []string{serial}
	for i := range rotations {
		prev := serials[len(serials)-1]
		var next string
		changed := time.Now()
		if err := cm.Poll(ctx, 2*time.Minute, fmt.Sprintf("cert-manager to replace the serving certificate (rotation %d)", i+1), func(ctx context.Context) (bool, error) {
			s, sec, err := secretSerial(ctx, c, servingSecret)
			if err != nil {
				return false, err
			}
			if !bytes.Equal(sec.Data["ca.crt"], ca) {
				return false, fmt.Errorf("Secret %s: the CA changed during the rotation", servingSecret)
			}
			next = s
			return s != prev, nil
		}); err != nil {
			t.Fatal(err)
		}
		issued := time.Now()
		waitServed(ctx, t, cm, backend, ca, next)
		served := time.Now()
		handshakes := waitNewConnection(ctx, t, proxy, load, c)
		t.Logf("rotation %d: serial %s -> %s; in the Secret %s after the wait for it began, served %s later; the API server's new connections with it: %d (admissions so far: %d)",
			i+1, prev, next, issued.Sub(changed).Round(time.Millisecond), served.Sub(issued).Round(time.Millisecond), handshakes, load.admitted())
		serials = append(serials, next)
	}
	// renewBefore back to the release's: the rotations stop.
	cert = certificate(ctx, t, c, servingCertificate)
	restore := cert.DeepCopy()
	restore.Spec.RenewBefore = before.Spec.RenewBefore
	if err := c.Patch(ctx, restore, client.MergeFrom(cert)); err != nil {
		t.Fatal(err)
	}
	// The load goes on until admissions were made with the last
	// certificate served.
	load.waitMore(ctx, t, 20)
	admitted, failed := load.stop()
	t.Logf("API server connections to modelgate: %d", proxy.Connections())
	t.Logf("admissions during the rotations: %d made, %d failed (%.1f/s; %d of the load's ticks skipped, every create in flight)",
		admitted, len(failed), load.rate(), load.skips())
	if admitted == 0 {
		t.Error("no Pod was admitted during the rotations")
	}
	for _, f := range failed {
		t.Error(f)
	}
	if err := vol.Err(); err != nil {
		t.Errorf("the Secret's volume stopped following it: %v", err)
	}
	// The CA stays injected: only the serving certificate rotated; and
	// conversion goes on with the new certificate.
	waitInjected(ctx, t, cm, c, ca)
	converts(ctx, t, c, root, "converted-last")
}

// converts creates the v1alpha1 sample AIInference as name, which the API
// server stores as v1 through modelgate's conversion webhook (behind the
// CRD's injected CA bundle), and reads it back in v1.
func converts(ctx context.Context, t *testing.T, c client.Client, root, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "config/samples/serving_v1alpha1_aiinference.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetName(name)
	if err := c.Create(ctx, u); err != nil {
		t.Fatalf("creating a v1alpha1 AIInference (converted to v1 by modelgate): %v", err)
	}
	v1 := &unstructured.Unstructured{}
	v1.SetAPIVersion("serving.modelgate.io/v1")
	v1.SetKind("AIInference")
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), v1); err != nil {
		t.Fatalf("reading AIInference %s in v1: %v", name, err)
	}
	if rev, _, _ := unstructured.NestedString(v1.Object, "spec", "model", "revision"); rev != "main" {
		t.Errorf("AIInference %s read in v1: spec.model.revision is %q, want the v1alpha1 modelSource's @main", name, rev)
	}
}

// checkIssued checks the serving Secret: a certificate for the Service's
// names, signed by the CA beside it.
func checkIssued(t *testing.T, s *corev1.Secret) {
	t.Helper()
	crt, err := leaf(s.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatalf("Secret %s has no CA in ca.crt", s.Name)
	}
	if _, err := crt.Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("Secret %s's certificate is not one for %s from its CA: %v", s.Name, serverName, err)
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("Secret %s: %v", s.Name, err)
	}
}

// waitInjected waits until every webhook configuration and CRD that asks
// for the serving Certificate's CA (inject-ca-from) carries ca, and
// returns their names; the release must have at least one of each of the
// three kinds.
func waitInjected(ctx context.Context, t *testing.T, cm *certmanager.CertManager, c client.Client, ca []byte) []string {
	t.Helper()
	from := env.Namespace + "/" + servingCertificate
	var names []string
	err := cm.Poll(ctx, time.Minute, "the CA bundle in the webhook configurations and the CRD conversion", func(ctx context.Context) (bool, error) {
		names = nil
		kinds := map[string]int{}
		var mutating admissionregistrationv1.MutatingWebhookConfigurationList
		var validating admissionregistrationv1.ValidatingWebhookConfigurationList
		var crds apiextensionsv1.CustomResourceDefinitionList
		for _, l := range []client.ObjectList{&mutating, &validating, &crds} {
			if err := c.List(ctx, l); err != nil {
				return false, err
			}
		}
		ok := true
		check := func(kind string, o metav1.Object, bundles [][]byte) {
			if o.GetAnnotations()[certmanager.InjectCAFromAnnotation] != from {
				return
			}
			kinds[kind]++
			names = append(names, kind+" "+o.GetName())
			for _, b := range bundles {
				ok = ok && bytes.Equal(b, ca)
			}
		}
		for i := range mutating.Items {
			var b [][]byte
			for _, w := range mutating.Items[i].Webhooks {
				b = append(b, w.ClientConfig.CABundle)
			}
			check("MutatingWebhookConfiguration", &mutating.Items[i], b)
		}
		for i := range validating.Items {
			var b [][]byte
			for _, w := range validating.Items[i].Webhooks {
				b = append(b, w.ClientConfig.CABundle)
			}
			check("ValidatingWebhookConfiguration", &validating.Items[i], b)
		}
		for i := range crds.Items {
			conv := crds.Items[i].Spec.Conversion
			if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
				continue
			}
			check("CustomResourceDefinition", &crds.Items[i], [][]byte{conv.Webhook.ClientConfig.CABundle})
		}
		if len(kinds) < 3 {
			return false, fmt.Errorf("the release asks for %s's CA in %v: want a MutatingWebhookConfiguration, a ValidatingWebhookConfiguration and a CRD", from, names)
		}
		return ok, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// waitServed waits until modelgate, at addr, serves the certificate with
// serial, to a client that trusts ca and asks for the Service's name.
func waitServed(ctx context.Context, t *testing.T, cm *certmanager.CertManager, addr string, ca []byte, serial string) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	var got string
	err := cm.Poll(ctx, time.Minute, "modelgate to serve the certificate with serial "+serial, func(ctx context.Context) (bool, error) {
		d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			got = err.Error()
			return false, nil
		}
		defer conn.Close()
		got = conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
		return got == serial, nil
	})
	if err != nil {
		t.Fatalf("%v (last served: %s)", err, got)
	}
}

// waitNewConnection waits until the API server has opened a connection to
// modelgate since the call, and so shaken hands with the certificate
// modelgate serves now: it keeps its connections to a webhook open across
// calls, and opens another when more calls are in flight than it has
// connections. Bursts of creates, counted with the load's, ask for more
// until it does. It returns the count of new connections.
func waitNewConnection(ctx context.Context, t *testing.T, proxy *certmanager.ServiceProxy, l *load, c client.Client) int64 {
	t.Helper()
	base := proxy.Connections()
	err := wait.PollUntilContextTimeout(ctx, 0, time.Minute, true, func(ctx context.Context) (bool, error) {
		l.burst(ctx, c, burst)
		return proxy.Connections() > base, nil
	})
	if err != nil {
		t.Fatalf("the API server opened no new connection to modelgate after the rotation: %v", err)
	}
	return proxy.Connections() - base
}

// waitAdmits waits until the API server admits an opted-in Pod through
// modelgate's webhooks (its webhook configurations are loaded from a
// watch, a moment after they change).
func waitAdmits(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = createPod(ctx, c)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server does not admit an opted-in Pod through modelgate: %v (%v)", last, err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func freePort(t *testing.T) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}
