package install

import (
	"crypto/x509"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/certs"
)

// testRotatorUnderPolicy runs the real certificate rotator (certs) as
// modelgate's service account, with the install's Configuration, and
// checks that it injects its CA into every target: first from a new
// Secret, then at a CA rollover (a clock 300 days on), which merges a
// second CA into the bundles.
func testRotatorUnderPolicy(t *testing.T, s *policyServer) {
	cfg := installConfiguration(t, s.objs)
	self := cfg.Certificates.Self
	now := time.Now()
	r := &certs.Rotator{
		Client:     s.modelgate,
		Reader:     s.modelgate,
		Namespace:  cfg.Namespace,
		SecretName: self.SecretName,
		Options: certs.Options{
			DNSNames:        []string{self.ServiceName + "." + cfg.Namespace + ".svc"},
			CALifetime:      self.CALifetime.Duration,
			ServingLifetime: self.ServingLifetime.Duration,
			RenewBefore:     self.RenewBefore.Duration,
			InjectionGrace:  self.InjectionGrace.Duration,
		},
		Targets: certs.Targets{
			Mutating:   self.MutatingWebhookConfigurations,
			Validating: self.ValidatingWebhookConfigurations,
			CRDs:       self.CustomResourceDefinitions,
		},
		Now: func() time.Time { return now },
	}
	for _, step := range []struct {
		what  string
		clock time.Time
		cas   int
	}{
		{"a new Secret", now, 1},
		{"a CA rollover", now.Add(300 * 24 * time.Hour), 2},
	} {
		now = step.clock
		if err := r.Reconcile(t.Context()); err != nil {
			t.Fatalf("%s: Reconcile as modelgate's service account: %v", step.what, err)
		}
		secret := &corev1.Secret{}
		if err := s.admin.Get(t.Context(), client.ObjectKey{Namespace: cfg.Namespace, Name: self.SecretName}, secret); err != nil {
			t.Fatal(err)
		}
		state := certs.ReadState(secret.Data)
		if len(state.Bundle) != step.cas {
			t.Fatalf("%s: the Secret holds %d CAs, want %d", step.what, len(state.Bundle), step.cas)
		}
		for name, bundle := range injectedBundles(t, s.admin, cfg) {
			for _, ca := range state.Bundle {
				if !holds(bundle, ca) {
					t.Errorf("%s: %s does not trust CA %s of the Secret", step.what, name, ca.SerialNumber)
				}
			}
		}
	}
}

// injectedBundles returns every caBundle of the Configuration's targets,
// by a name for messages.
func injectedBundles(t *testing.T, c client.Client, cfg *config.Configuration) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	self := cfg.Certificates.Self
	for _, n := range self.MutatingWebhookConfigurations {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: n}, m); err != nil {
			t.Fatal(err)
		}
		for _, w := range m.Webhooks {
			out[n+" "+w.Name] = w.ClientConfig.CABundle
		}
	}
	for _, n := range self.ValidatingWebhookConfigurations {
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: n}, v); err != nil {
			t.Fatal(err)
		}
		for _, w := range v.Webhooks {
			out[n+" "+w.Name] = w.ClientConfig.CABundle
		}
	}
	for _, n := range self.CustomResourceDefinitions {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(t.Context(), client.ObjectKey{Name: n}, crd); err != nil {
			t.Fatal(err)
		}
		out[n+" conversion"] = crd.Spec.Conversion.Webhook.ClientConfig.CABundle
	}
	if len(out) == 0 {
		t.Fatal("the Configuration names no CA bundle target")
	}
	return out
}

// holds reports whether a PEM bundle holds the certificate.
func holds(bundle []byte, cert *x509.Certificate) bool {
	cs, err := certs.ParseCertificates(bundle)
	return err == nil && slices.ContainsFunc(cs, cert.Equal)
}
