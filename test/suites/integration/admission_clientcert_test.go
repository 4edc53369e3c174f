package integration_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/certs"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook"
)

// apiServerClient is the client certificate the suite's API server
// presents to the webhooks it calls at one address, and the CA that
// signed it (presentAdmissionClientCertificate).
var apiServerClient *admissionClient

// admissionClient is an identity the API server presents to webhooks.
type admissionClient struct {
	// addr is the host:port the API server presents the certificate to:
	// its admission kubeconfig's user is named after it.
	addr string
	// reserved holds addr's port until the spec that serves there starts.
	reserved net.Listener
	// ca signed cert; caFile is its PEM, a webhook.clientCAFile.
	ca     *certs.KeyPair
	caFile string
	cert   tls.Certificate
}

// presentAdmissionClientCertificate configures the API server, before it
// starts, as docs/operations.md ("Only the API server calls the webhooks")
// says: an AdmissionConfiguration (--admission-control-config-file) whose
// webhook plugins read a kubeconfig with a client certificate, signed by a
// CA made here, for the webhooks at one address, a port of 127.0.0.1 held
// until a spec serves there. Webhooks elsewhere (the suite's modelgate)
// get no certificate, as before.
func presentAdmissionClientCertificate(te *envtest.Environment) *admissionClient {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	reserved, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = reserved.Close() })
	ca, err := certs.NewCA("kube-apiserver-webhook-client-ca", time.Now(), 24*time.Hour)
	Expect(err).NotTo(HaveOccurred())
	kp, err := certs.NewClient(ca, "kube-apiserver-webhook-client", nil, time.Now(), 24*time.Hour)
	Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	Expect(err).NotTo(HaveOccurred())
	c := &admissionClient{addr: reserved.Addr().String(), reserved: reserved, ca: ca,
		caFile: filepath.Join(dir, "webhook-client-ca.crt"), cert: cert}
	Expect(os.WriteFile(c.caFile, ca.CertPEM, 0o600)).To(Succeed())

	// The user is named after the webhook's host:port, as the API server
	// looks it up (for a Service: <name>.<namespace>.svc:<port>).
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.AuthInfos[c.addr] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM}
	kubeconfigFile := filepath.Join(dir, "webhook-kubeconfig.yaml")
	Expect(clientcmd.WriteToFile(*kubeconfig, kubeconfigFile)).To(Succeed())
	admissionConfig := filepath.Join(dir, "admission-configuration.yaml")
	Expect(os.WriteFile(admissionConfig, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kubeconfigFile+`
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: `+kubeconfigFile+`
`), 0o600)).To(Succeed())
	te.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", admissionConfig)
	return c
}

// handshake makes a TLS handshake with the server at addr, presenting cert
// when it is not nil (whatever CAs the server says it accepts), sends
// nothing else, and returns how the server ends it: with TLS 1.3 the
// client's side of the handshake is over first, and the server's verdict
// on the certificate is the next thing it sends. (A request sent at once
// may find the connection closed under it instead.) A server that accepts
// the certificate waits for a request: the read times out.
func handshake(addr string, roots *x509.CertPool, cert *tls.Certificate) error {
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

// tlsRefusal reports whether err is the server's TLS alert: a refusal in
// the handshake, not an HTTP answer.
func tlsRefusal(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// clientCertLabel selects the namespaces whose Pods go to this file's
// modelgate, through the webhook configurations it installs.
const clientCertLabel = "integration.modelgate.io/client-certificate"

// Issue 42, item 7: only the API server may call the admission endpoints.
var _ = Describe("webhooks that require the API server's client certificate", Ordered, func() {
	var (
		ctx = context.Background()
		// url is the webhook server's; roots trust its certificate.
		url   string
		roots *x509.CertPool
		// ns goes to the webhooks at the address the API server has a
		// certificate for, anonymous to the same webhooks at localhost.
		ns, anonymous string
	)

	BeforeAll(func() {
		addr := apiServerClient.addr
		host, port, err := net.SplitHostPort(addr)
		Expect(err).NotTo(HaveOccurred())
		url = "https://" + addr

		// Serving: a certificate for 127.0.0.1 and localhost.
		servingCA, err := certs.NewCA("clientcert-serving-ca", time.Now(), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		serving, err := certs.NewServing(servingCA, []string{"localhost"}, []net.IP{net.ParseIP(host)}, time.Now(), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		certDir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(certDir, "tls.crt"), serving.CertPEM, 0o600)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(certDir, "tls.key"), serving.KeyPEM, 0o600)).To(Succeed())
		roots = x509.NewCertPool()
		roots.AddCert(servingCA.Cert)

		// A policy only this modelgate has: its denials show who answered.
		policyDir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(policyDir, "clientcert-denied.rego"), []byte(`package integration.clientcert

deny contains "pods labelled deny are refused" if input.workload.labels.deny == "true"
`), 0o600)).To(Succeed())

		cfg := config.New()
		p, err := strconv.ParseInt(port, 10, 32)
		Expect(err).NotTo(HaveOccurred())
		cfg.Webhook.Host, cfg.Webhook.Port, cfg.Webhook.CertDir = host, int32(p), certDir
		cfg.Webhook.ClientCAFile = apiServerClient.caFile
		cfg.Policy.Directory = policyDir
		// The webhooks alone: the suite's modelgate runs the controllers.
		cfg.Controller.Enabled, cfg.Audit.Enabled = ptr.To(false), ptr.To(false)
		cfg.Metrics.BindAddress = "0"
		healthAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
		cfg.Health.BindAddress = healthAddr
		cfg.DrainPeriod.Duration = 0
		Expect(cfg.Validate()).To(BeEmpty())

		mgr, err := webhook.NewManager(adminCfg, cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(apiServerClient.reserved.Close()).To(Succeed())
		stop, done := runManager(mgr)
		DeferCleanup(func() {
			stop()
			Eventually(done).WithTimeout(15 * time.Second).Should(BeClosed())
		})
		// Ready: the webhook-server check completes a handshake on the
		// port that requires a client certificate.
		Eventually(func() int { code, _ := readyz(healthAddr); return code }).WithTimeout(time.Minute).Should(Equal(http.StatusOK))

		ns = namespace(ctx, map[string]string{annotations.NamespaceInjection: annotations.InjectionEnabled, clientCertLabel: "api-server"})
		anonymous = namespace(ctx, map[string]string{clientCertLabel: "anonymous"})
		installClientCertWebhooks(ctx, servingCA.CertPEM, "https://"+addr, "https://"+net.JoinHostPort("localhost", port))

		// The API server loads webhook configurations through a watch:
		// they are in force once this modelgate's own policy answers.
		Eventually(func(g Gomega) {
			g.Expect(admin.Create(ctx, gpuPod(ns, "probe", true), client.DryRunAll)).To(MatchError(ContainSubstring("[clientcert-denied]")))
		}).Should(Succeed())
	})

	It("injects and denies through the API server, which presents its certificate", func() {
		pod := gpuPod(ns, "injected", false)
		Expect(admin.Create(ctx, pod)).To(Succeed(), "the mutating and validating webhooks (failurePolicy Fail) answered the API server")
		Expect(pod.Labels).To(HaveKey(annotations.OwnerLabel))
		Expect(pod.Annotations).To(HaveKey(annotations.Injected))

		err := admin.Create(ctx, gpuPod(ns, "denied", true))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring(`admission webhook "validate.clientcert.modelgate.io" denied the request: [clientcert-denied] pods labelled deny are refused`)))
	})

	It("refuses the API server where it presents no certificate", func() {
		err := admin.Create(ctx, gpuPod(anonymous, "refused", false), client.DryRunAll)
		Expect(apierrors.IsInternalError(err)).To(BeTrue(), "%v", err)
		// In TLS 1.3 the API server's side of the handshake is over before
		// modelgate checks the certificate: it reads modelgate's alert, or,
		// when it is still writing the review, finds the connection closed
		// under it. Not an x509 error (the serving certificate is fine for
		// localhost), not a refused connection, not an answer.
		Expect(err).To(MatchError(And(ContainSubstring(`failed calling webhook "anonymous.clientcert.modelgate.io"`),
			Or(ContainSubstring("remote error: tls: certificate required"), ContainSubstring("write: broken pipe"),
				ContainSubstring("connection reset by peer")))))
	})

	It("refuses a direct caller without the API server's certificate in the TLS handshake", func() {
		review := podReview(ns)
		other, err := certs.NewCA("another-ca", time.Now(), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		forged := signedCertificate(other, "kube-apiserver-webhook-client")
		for name, cert := range map[string]*tls.Certificate{"without a certificate": nil, "with a certificate of another CA": &forged} {
			By(name)
			Expect(handshake(apiServerClient.addr, roots, cert)).To(Satisfy(tlsRefusal), "a TLS alert")
			got, err := postReview(url+webhook.ValidatePath, roots, cert, review)
			Expect(err).To(HaveOccurred(), "no answer, got %v", got)
		}

		By("with the API server's certificate, the same review is answered")
		got, err := postReview(url+webhook.ValidatePath, roots, &apiServerClient.cert, review)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Response).NotTo(BeNil())
		Expect(got.Response.UID).To(Equal(review.Request.UID))
	})

	It("trusts a CA added to the file without a restart", func() {
		next, err := certs.NewCA("next-ca", time.Now(), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		cert := signedCertificate(next, "kube-apiserver-webhook-client")
		original, err := os.ReadFile(apiServerClient.caFile)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(os.WriteFile(apiServerClient.caFile, original, 0o600)).To(Succeed()) })
		Expect(handshake(apiServerClient.addr, roots, &cert)).To(Satisfy(tlsRefusal), "a TLS alert before the CA is added")

		// As a ConfigMap volume update: a new file renamed over the old.
		tmp := apiServerClient.caFile + ".tmp"
		Expect(os.WriteFile(tmp, append(append([]byte{}, original...), next.CertPEM...), 0o600)).To(Succeed())
		Expect(os.Rename(tmp, apiServerClient.caFile)).To(Succeed())
		Eventually(func() error {
			_, err := postReview(url+webhook.ValidatePath, roots, &cert, podReview(ns))
			return err
		}).Should(Succeed())
		Expect(admin.Create(ctx, gpuPod(ns, "after-the-change", false), client.DryRunAll)).To(Succeed(), "the API server's certificate still gets in")
	})
})

// gpuPod is an opted-in Pod asking for a GPU, labelled deny: "true" when
// deny is set.
func gpuPod(ns, name string, deny bool) *corev1.Pod {
	o := builders.Options{Namespace: ns, Name: name, Annotations: optIn}
	if deny {
		o.Labels = map[string]string{"deny": "true"}
	}
	pod := builders.New("Pod", o).(*corev1.Pod)
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	return pod
}

// podReview is the AdmissionReview the API server sends to /validate for
// the creation of a gpuPod in ns.
func podReview(ns string) *admissionv1.AdmissionReview {
	GinkgoHelper()
	raw, err := json.Marshal(gpuPod(ns, "direct", false))
	Expect(err).NotTo(HaveOccurred())
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("direct-" + uniqueName("review")),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Name:      "direct",
			Namespace: ns,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
}

// postReview posts the review on a new connection, presenting cert when it
// is not nil whatever CAs the server says it accepts (Go's client would
// keep back one they did not sign), and returns the answer.
func postReview(url string, roots *x509.CertPool, cert *tls.Certificate, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(body)) //nolint:noctx // a test call.
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	out := &admissionv1.AdmissionReview{}
	return out, json.NewDecoder(resp.Body).Decode(out)
}

// installClientCertWebhooks installs, until the end of the spec container,
// a mutating and a validating webhook for Pods in the namespaces labelled
// clientCertLabel=api-server at url (to which the API server presents its
// certificate), and a validating webhook for those labelled anonymous at
// anonymousURL (the same server, another name: no certificate), each
// failing closed.
func installClientCertWebhooks(ctx context.Context, caBundle []byte, url, anonymousURL string) {
	GinkgoHelper()
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	selector := func(value string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{clientCertLabel: value}}
	}
	clientConfig := func(url, path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url + path), CABundle: caBundle}
	}
	validating := func(name, url, value string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: clientConfig(url, webhook.ValidatePath), Rules: rules,
			NamespaceSelector: selector(value), FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](5),
		}
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "integration-clientcert"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "inject.clientcert.modelgate.io", ClientConfig: clientConfig(url, webhook.MutatePath), Rules: rules,
			NamespaceSelector: selector("api-server"), FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](5), ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}
	validatingConfig := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "integration-clientcert"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			validating("validate.clientcert.modelgate.io", url, "api-server"),
			validating("anonymous.clientcert.modelgate.io", anonymousURL, "anonymous"),
		},
	}
	for _, obj := range []client.Object{mutating, validatingConfig} {
		Expect(admin.Create(ctx, obj)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(admin.Delete(ctx, obj))).To(Succeed()) })
	}
}
