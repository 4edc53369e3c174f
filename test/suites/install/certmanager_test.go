package install

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

func servingSecret(t *testing.T, objs []client.Object) string {
	t.Helper()
	d := only[*appsv1.Deployment](t, objs)
	certDir := installConfiguration(t, objs).Webhook.CertDir
	for _, m := range modelgateContainer(t, d).VolumeMounts {
		if filepath.Clean(m.MountPath) != filepath.Clean(certDir) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
	}
	return ""
}

// servingCertificate returns the Certificate that writes the Secret the
// Deployment serves from.
func servingCertificate(t *testing.T, objs []client.Object) *cmv1.Certificate {
	t.Helper()
	secret := servingSecret(t, objs)
	if secret == "" {
		t.Fatal("the Deployment mounts no Secret at the Configuration's webhook.certDir")
	}
	var found []*cmv1.Certificate
	for _, c := range ofType[*cmv1.Certificate](objs) {
		if c.Spec.SecretName == secret {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one Certificate writing Secret %s, the one the Deployment mounts; got %d", secret, len(found))
	}
	return found[0]
}

// calledServices returns the Services the API server calls: those of every
// admission webhook and CRD conversion webhook, as namespace/name.
func calledServices(objs []client.Object) []string {
	var out []string
	add := func(s *admissionregistrationv1.ServiceReference) {
		if s != nil {
			out = append(out, s.Namespace+"/"+s.Name)
		}
	}
	for _, m := range ofType[*admissionregistrationv1.MutatingWebhookConfiguration](objs) {
		for _, w := range m.Webhooks {
			add(w.ClientConfig.Service)
		}
	}
	for _, v := range ofType[*admissionregistrationv1.ValidatingWebhookConfiguration](objs) {
		for _, w := range v.Webhooks {
			add(w.ClientConfig.Service)
		}
	}
	for _, crd := range ofType[*apiextensionsv1.CustomResourceDefinition](objs) {
		if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig != nil && c.Webhook.ClientConfig.Service != nil {
			out = append(out, c.Webhook.ClientConfig.Service.Namespace+"/"+c.Webhook.ClientConfig.Service.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// issuer returns the Issuer an issuerRef names in a namespace, or nil.
func issuer(objs []client.Object, namespace string, ref cmmeta.IssuerReference) *cmv1.Issuer {
	if (ref.Kind != "" && ref.Kind != cmv1.IssuerKind) || (ref.Group != "" && ref.Group != "cert-manager.io") {
		return nil
	}
	for _, i := range ofType[*cmv1.Issuer](objs) {
		if i.Namespace == namespace && i.Name == ref.Name {
			return i
		}
	}
	return nil
}

// TestServingCertificate holds config/certmanager to what the webhook
// needs: the Certificate behind the Secret the Deployment serves from
// covers every Service the API server calls, is signed by a CA Issuer whose
// CA is a self-signed CA Certificate, and has the lifetimes of modelgate's
// own rotation. Checked on config/certmanager with the bases it serves, and
// on config/default, the install.
func TestServingCertificate(t *testing.T) {
	for name, dirs := range map[string][]string{
		"config/certmanager": {"config/certmanager", "config/crd", "config/manager", "config/webhook"},
		defaultInstall:       {defaultInstall},
	} {
		t.Run(name, func(t *testing.T) {
			objs := decoded(t, dirs...)
			serving := servingCertificate(t, objs)
			ns := serving.Namespace
			if d := only[*appsv1.Deployment](t, objs); d.Namespace != ns {
				t.Errorf("Certificate %s is in namespace %s, the Deployment mounting its Secret in %s", serving.Name, ns, d.Namespace)
			}

			services := calledServices(objs)
			if len(services) == 0 {
				t.Fatal("no webhook calls a Service")
			}
			for _, svc := range services {
				svcNS, svcName, _ := strings.Cut(svc, "/")
				if !slices.ContainsFunc(ofType[*corev1.Service](objs), func(s *corev1.Service) bool {
					return s.Namespace == svcNS && s.Name == svcName
				}) {
					t.Errorf("webhooks call Service %s, which is not rendered", svc)
				}
				if svcNS != ns {
					t.Errorf("webhooks call Service %s, outside the Certificate's namespace %s", svc, ns)
				}
				for _, dns := range []string{
					svcName + "." + svcNS + ".svc", svcName + "." + svcNS + ".svc.cluster.local",
					svcName, svcName + "." + svcNS,
				} {
					if !slices.Contains(serving.Spec.DNSNames, dns) {
						t.Errorf("Certificate %s dnsNames %q lack %s (Service %s)", serving.Name, serving.Spec.DNSNames, dns, svc)
					}
				}
			}
			for _, u := range []cmv1.KeyUsage{cmv1.UsageServerAuth, cmv1.UsageDigitalSignature} {
				if !slices.Contains(serving.Spec.Usages, u) {
					t.Errorf("Certificate %s usages %q lack %q", serving.Name, serving.Spec.Usages, u)
				}
			}
			if serving.Spec.IsCA {
				t.Errorf("Certificate %s is a CA", serving.Name)
			}

			caIssuer := issuer(objs, ns, serving.Spec.IssuerRef)
			if caIssuer == nil || caIssuer.Spec.CA == nil {
				t.Fatalf("Certificate %s issuerRef %+v names no CA Issuer in %s", serving.Name, serving.Spec.IssuerRef, ns)
			}
			var ca *cmv1.Certificate
			for _, c := range ofType[*cmv1.Certificate](objs) {
				if c.Namespace == ns && c.Spec.SecretName == caIssuer.Spec.CA.SecretName {
					ca = c
				}
			}
			if ca == nil {
				t.Fatalf("no Certificate writes Secret %s, the CA of Issuer %s", caIssuer.Spec.CA.SecretName, caIssuer.Name)
			}
			if !ca.Spec.IsCA {
				t.Errorf("Certificate %s, the CA of Issuer %s, is not isCA", ca.Name, caIssuer.Name)
			}
			if root := issuer(objs, ns, ca.Spec.IssuerRef); root == nil || root.Spec.SelfSigned == nil {
				t.Errorf("CA Certificate %s issuerRef %+v names no selfSigned Issuer in %s", ca.Name, ca.Spec.IssuerRef, ns)
			}
			if ca.Spec.PrivateKey == nil || ca.Spec.PrivateKey.RotationPolicy != cmv1.RotationPolicyNever {
				t.Errorf("CA Certificate %s privateKey %+v: want rotationPolicy Never (config/certmanager/ca.yaml says why)", ca.Name, ca.Spec.PrivateKey)
			}

			for _, c := range []*cmv1.Certificate{serving, ca} {
				if k := c.Spec.PrivateKey; k == nil || k.Algorithm != cmv1.ECDSAKeyAlgorithm || k.Size != 256 {
					t.Errorf("Certificate %s privateKey %+v, want ECDSA 256 (P-256)", c.Name, k)
				}
			}
			// The lifetimes of certificates.mode self (api/config/v1alpha1), so
			// that the two modes rotate alike.
			lifetimes := []struct {
				what      string
				got       *metav1.Duration
				want      time.Duration
				atLeastOK bool
			}{
				{"serving duration", serving.Spec.Duration, config.DefaultServingLifetime, false},
				{"serving renewBefore", serving.Spec.RenewBefore, config.DefaultRenewBefore, false},
				{"CA duration", ca.Spec.Duration, config.DefaultCALifetime, false},
				// cert-manager signs certificates that outlive their CA and
				// does not reissue them when it is renewed: the CA must be
				// renewed while everything it signed is still valid, and
				// the serving certificate renewed by its successor.
				{"CA renewBefore", ca.Spec.RenewBefore, config.DefaultServingLifetime + config.DefaultRenewBefore, true},
			}
			for _, l := range lifetimes {
				switch {
				case l.got == nil:
					t.Errorf("%s is unset, want %s", l.what, l.want)
				case l.atLeastOK && l.got.Duration < l.want:
					t.Errorf("%s = %s, want at least %s", l.what, l.got.Duration, l.want)
				case !l.atLeastOK && l.got.Duration != l.want:
					t.Errorf("%s = %s, want %s", l.what, l.got.Duration, l.want)
				}
			}
			if ca.Spec.Duration != nil && ca.Spec.RenewBefore != nil && ca.Spec.RenewBefore.Duration >= ca.Spec.Duration.Duration/2 {
				t.Errorf("CA renewBefore %s is half its duration %s or more", ca.Spec.RenewBefore.Duration, ca.Spec.Duration.Duration)
			}
		})
	}
}

// TestCAInjection checks that config/default asks cert-manager to inject
// the serving certificate's CA exactly where the API server needs it:
// both webhook configurations and the CRD with a conversion webhook, and
// that these are the objects certificates.mode self patches.
func TestCAInjection(t *testing.T) {
	objs := decoded(t, defaultInstall)
	serving := servingCertificate(t, objs)
	want := serving.Namespace + "/" + serving.Name

	annotated := map[string]string{}
	for _, o := range objs {
		if v, ok := o.GetAnnotations()[env.InjectCAFromAnnotation]; ok {
			annotated[typedName(o)] = v
		}
	}
	annotatedNames := slices.Sorted(maps.Keys(annotated))
	for name, tc := range map[string]struct{ want string }{
		"*v1.MutatingWebhookConfiguration modelgate-mutating":               {want: want},
		"*v1.ValidatingWebhookConfiguration modelgate-validating":           {want: want},
		"*v1.CustomResourceDefinition aiinferences.serving.modelgate.io":    {want: want},
		"*v1.CustomResourceDefinition workloadpolicies.policy.modelgate.io": {want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			if !slices.ContainsFunc(objs, func(o client.Object) bool { return typedName(o) == name }) {
				t.Fatalf("%s is not rendered", name)
			}
			if got := annotated[name]; got != tc.want {
				t.Errorf("%s = %q, want %q", env.InjectCAFromAnnotation, got, tc.want)
			}
		})
	}

	t.Run("every CA bundle consumer and no other object", func(t *testing.T) {
		var consumers []string
		for _, o := range objs {
			switch o := o.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration:
				consumers = append(consumers, typedName(o))
			case *apiextensionsv1.CustomResourceDefinition:
				if o.Spec.Conversion != nil && o.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
					consumers = append(consumers, typedName(o))
				}
			}
		}
		slices.Sort(consumers)
		if diff := cmp.Diff(consumers, annotatedNames); diff != "" {
			t.Errorf("objects with %s (-webhook configurations and conversion CRDs +annotated):\n%s", env.InjectCAFromAnnotation, diff)
		}
	})

	t.Run("the objects certificates.mode self patches", func(t *testing.T) {
		self := installConfiguration(t, decoded(t, selfManagedInstall)).Certificates.Self
		var targets []string
		for _, n := range self.MutatingWebhookConfigurations {
			targets = append(targets, "*v1.MutatingWebhookConfiguration "+n)
		}
		for _, n := range self.ValidatingWebhookConfigurations {
			targets = append(targets, "*v1.ValidatingWebhookConfiguration "+n)
		}
		for _, n := range self.CustomResourceDefinitions {
			targets = append(targets, "*v1.CustomResourceDefinition "+n)
		}
		slices.Sort(targets)
		if diff := cmp.Diff(targets, annotatedNames); diff != "" {
			t.Errorf("CA bundle targets (-config/self-managed's certificates.self +config/default's %s):\n%s", env.InjectCAFromAnnotation, diff)
		}
	})
}

// typedName names an object by its Go type and name, as the CA injection
// tests key them ("*v1.CustomResourceDefinition aiinferences...").
func typedName(o client.Object) string { return fmt.Sprintf("%T %s", o, o.GetName()) }
