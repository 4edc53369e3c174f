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
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

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
	load := env.StartLoad(ctx, func(ctx context.Context) error { return createPod(ctx, c) })
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
		handshakes := waitNewConnection(ctx, t, proxy, load)
		t.Logf("rotation %d: serial %s -> %s; in the Secret %s after the wait for it began, served %s later; the API server's new connections with it: %d (admissions so far: %d)",
			i+1, prev, next, issued.Sub(changed).Round(time.Millisecond), served.Sub(issued).Round(time.Millisecond), handshakes, load.Admitted())
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
	if err := load.WaitMore(ctx, 20, time.Minute); err != nil {
		t.Fatal(err)
	}
	admitted, failed := load.Stop()
	t.Logf("API server connections to modelgate: %d", proxy.Connections())
	t.Logf("admissions during the rotations: %d made, %d failed (%.1f/s; %d of the load's ticks skipped, every create in flight)",
		admitted, len(failed), load.Rate(), load.Skipped())
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
