package certmanager

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InjectCAFromAnnotation asks cert-manager's cainjector to copy the CA of
// a Certificate, named <namespace>/<name>, into an object's caBundle
// fields.
const InjectCAFromAnnotation = "cert-manager.io/inject-ca-from"

// probe names the objects waitActs checks cert-manager with.
const probe = "certmanager-probe"

// waitActs creates a self-signed Issuer, a CA Certificate it issues and a
// ValidatingWebhookConfiguration asking for that CA, waits until the
// Certificate is Ready and the CA is in the webhook's caBundle, and
// deletes them.
func (cm *CertManager) waitActs(ctx context.Context, c client.Client) error {
	issuer := &cmv1.Issuer{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: probe},
		Spec:       cmv1.IssuerSpec{IssuerConfig: cmv1.IssuerConfig{SelfSigned: &cmv1.SelfSignedIssuer{}}},
	}
	cert := &cmv1.Certificate{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: probe},
		Spec: cmv1.CertificateSpec{
			CommonName: probe, IsCA: true, SecretName: probe,
			IssuerRef: cmmeta.IssuerReference{Group: cmv1.SchemeGroupVersion.Group, Kind: cmv1.IssuerKind, Name: probe},
		},
	}
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: probe, Annotations: map[string]string{InjectCAFromAnnotation: Namespace + "/" + probe}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "probe.certmanager.modelgate.io",
			// Never called: it matches a group no API serves.
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/never")},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"probe.certmanager.modelgate.io"}, APIVersions: []string{"v1"}, Resources: []string{"probes"},
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	objs := []client.Object{issuer, cert, hook}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	err := cm.Poll(ctx, startTimeout, "cert-manager to issue a self-signed Certificate and inject its CA", func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: probe}, s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ca := s.Data["ca.crt"]
		if ready, err := Ready(ctx, c, client.ObjectKeyFromObject(cert)); len(ca) == 0 || !ready || err != nil {
			return false, err
		}
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(hook), got); err != nil {
			return false, err
		}
		return bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, ca), nil
	})
	errs := []error{err}
	for _, o := range append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: probe}}) {
		errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, o)))
	}
	errs = append(errs, c.DeleteAllOf(ctx, &cmv1.CertificateRequest{}, client.InNamespace(Namespace)))
	return errors.Join(errs...)
}

// Ready says whether the Certificate's Ready condition is True for its
// current generation.
func Ready(ctx context.Context, c client.Reader, key client.ObjectKey) (bool, error) {
	got := &cmv1.Certificate{}
	if err := c.Get(ctx, key, got); err != nil {
		return false, err
	}
	for _, cond := range got.Status.Conditions {
		if cond.Type == cmv1.CertificateConditionReady {
			return cond.Status == cmmeta.ConditionTrue && cond.ObservedGeneration == got.Generation, nil
		}
	}
	return false, nil
}
