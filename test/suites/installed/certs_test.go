package installed_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/harnesses/certmanager"
)

// servingCertificate is the chart's (and config/default's) webhook
// Certificate and its Secret.
const (
	servingCertificate = "modelgate-webhook"
	servingSecret      = "modelgate-webhook-tls"
)

// issued reads the serving Secret: the serial of its certificate, and its
// CA.
func issued(ctx context.Context, g Gomega) (string, []byte) {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: servingSecret}, s)).To(Succeed())
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	g.Expect(block).NotTo(BeNil(), "no certificate in %s", servingSecret)
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Data["ca.crt"]).NotTo(BeEmpty())
	return cert.SerialNumber.String(), s.Data["ca.crt"]
}

// served is the serial of the certificate a Pod serves its webhooks with
// (port 9443 at its own address), checked as the API server checks it:
// against ca, for the Service's name.
func served(ctx context.Context, g Gomega, pod *corev1.Pod, ca []byte) string {
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(ca)).To(BeTrue())
	d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: webhookService + "." + installNamespace + ".svc", MinVersion: tls.VersionTLS12}}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(pod.Status.PodIP, "9443"))
	g.Expect(err).NotTo(HaveOccurred(), "pod %s", pod.Name)
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// expectCertManagerInstall checks what cert-manager did for an install:
// the serving Certificate is Ready, its CA is in every webhook and in the
// AIInference CRD's conversion, and every replica serves the issued
// certificate.
func expectCertManagerInstall(ctx context.Context, pods []corev1.Pod) {
	GinkgoHelper()
	eventually(ctx, func(g Gomega) {
		ready, err := certmanager.Ready(ctx, k8s, client.ObjectKey{Namespace: installNamespace, Name: servingCertificate})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ready).To(BeTrue(), "Certificate %s is not Ready", servingCertificate)
		serial, ca := issued(ctx, g)
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "modelgate-mutating"}, mutating)).To(Succeed())
		for _, w := range mutating.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(ca), w.Name)
		}
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "modelgate-validating"}, validating)).To(Succeed())
		for _, w := range validating.Webhooks {
			g.Expect(w.ClientConfig.CABundle).To(Equal(ca), w.Name)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "aiinferences.serving.modelgate.io"}, crd)).To(Succeed())
		g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).To(Equal(ca))
		for i := range pods {
			g.Expect(served(ctx, g, &pods[i], ca)).To(Equal(serial), "pod %s serves another certificate than %s's", pods[i].Name, servingSecret)
		}
	}).Should(Succeed())
}

// forceRenewal has cert-manager renew the serving certificate now, as a
// short renewBefore does: renewBefore set to the duration less 10 seconds,
// until the Secret holds a certificate other than the one it held; then
// the shipped renewBefore again, so that renewals stop.
func forceRenewal(ctx context.Context) {
	GinkgoHelper()
	var before string
	eventually(ctx, func(g Gomega) { before, _ = issued(ctx, g) }).Should(Succeed())
	cert := &cmv1.Certificate{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: servingCertificate}, cert)).To(Succeed())
	shipped := cert.Spec.RenewBefore.DeepCopy()
	Expect(cert.Spec.Duration).NotTo(BeNil())
	patch := client.MergeFrom(cert.DeepCopy())
	cert.Spec.RenewBefore.Duration = cert.Spec.Duration.Duration - 10*time.Second
	Expect(k8s.Patch(ctx, cert, patch)).To(Succeed())
	eventually(ctx, func(g Gomega) {
		now, _ := issued(ctx, g)
		g.Expect(now).NotTo(Equal(before), "cert-manager has not renewed yet")
	}).Should(Succeed())
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: servingCertificate}, cert)).To(Succeed())
	patch = client.MergeFrom(cert.DeepCopy())
	cert.Spec.RenewBefore = shipped
	Expect(k8s.Patch(ctx, cert, patch)).To(Succeed())
}
