package integration_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// The suite's modelgate runs as its own service account with config/rbac's
// permissions only (env.ModelgateIdentity), which also installed the
// ClusterRole modelgate-metrics-reader: these specs prove those
// permissions suffice for the filter's TokenReviews and
// SubjectAccessReviews, and that the role is all a scraper needs.
var _ = Describe("metrics", func() {
	It("are served over HTTPS only to callers allowed to get /metrics", func() {
		ctx := context.Background()
		// One review, so modelgate's counters have a sample to show.
		ns := namespace(ctx, nil)
		Expect(admin.Create(ctx, builders.New("Pod",
			builders.Options{Namespace: ns, Name: "metrics", Annotations: optIn}))).To(Succeed())

		// Two service accounts with tokens the API server issues
		// (TokenRequest; envtest's kube-apiserver signs them), one bound
		// to modelgate-metrics-reader as docs/operations.md says to bind a
		// Prometheus.
		clientset, err := kubernetes.NewForConfig(adminCfg)
		Expect(err).NotTo(HaveOccurred())
		token := func(name string) string {
			GinkgoHelper()
			Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
			tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return tr.Status.Token
		}
		reader, stranger := token("prometheus"), token("stranger")
		Expect(admin.Get(ctx, client.ObjectKey{Name: "modelgate-metrics-reader"}, &rbacv1.ClusterRole{})).To(Succeed())
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "modelgate-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "prometheus"}},
		}
		Expect(admin.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(context.Background(), binding))).To(Succeed()) })

		get := func(url, bearer string) (int, string) { return getMetrics(ctx, url, nil, bearer) }
		scrape := func(bearer string) (int, string) { return get("https://"+metricsAddr+"/metrics", bearer) }

		// No token: 401 (Eventually: the manager may still be starting
		// the metrics server).
		Eventually(func() int { code, _ := scrape(""); return code }).Should(Equal(http.StatusUnauthorized))
		// modelgate's filter answers a token the API server rejects
		// outright with 500 ("Authentication failed"), as
		// controller-runtime's does: no metrics either way.
		code, body := scrape("not-a-token")
		Expect(code).NotTo(Equal(http.StatusOK))
		Expect(body).NotTo(ContainSubstring("modelgate_"))
		// An authenticated caller without the role: 403.
		code, body = scrape(stranger)
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).NotTo(ContainSubstring("modelgate_"))
		// Bound to modelgate-metrics-reader: the metrics (Eventually: the
		// binding reaches the API server's authorizer cache).
		Eventually(func() int { code, _ := scrape(reader); return code }).Should(Equal(http.StatusOK))
		code, body = scrape(reader)
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("controller_runtime_webhook_requests_total"))
		Expect(body).To(ContainSubstring("modelgate_mutating_reviews_total"))

		// Plain HTTP gets no metrics, with a token or without: Go's TLS
		// server answers 400 to a plain request.
		code, body = get("http://"+metricsAddr+"/metrics", reader)
		Expect(code).NotTo(Equal(http.StatusOK))
		Expect(strings.Contains(body, "modelgate_")).To(BeFalse())
	})
})

// getMetrics gets url presenting the client certificate cert (nil: none)
// and the bearer token ("": none), on a connection of its own, and
// returns the status (0 when the request fails) and the body (or the
// error). The server's certificate is controller-runtime's self-signed
// one: trust is not the point here.
func getMetrics(ctx context.Context, url string, cert *tls.Certificate, bearer string) (int, string) {
	GinkgoHelper()
	tc := &tls.Config{InsecureSkipVerify: true}
	if cert != nil {
		tc.Certificates = []tls.Certificate{*cert}
	}
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
