package certmanager_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/certmanager"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

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
func waitNewConnection(ctx context.Context, t *testing.T, proxy *certmanager.ServiceProxy, l *env.Load) int64 {
	t.Helper()
	base := proxy.Connections()
	err := wait.PollUntilContextTimeout(ctx, 0, time.Minute, true, func(ctx context.Context) (bool, error) {
		l.Burst(ctx, burst)
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
