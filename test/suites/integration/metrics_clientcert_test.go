package integration_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/certs"
)

// clusterClientCA writes the cluster's client CA, as the API server
// publishes it in kube-system/extension-apiserver-authentication
// (client-ca-file), into a file and returns its path: the suite's
// metrics.clientCAFile, set up as docs/operations.md says ("Scraping with a
// client certificate").
func clusterClientCA(ctx context.Context) string {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "extension-apiserver-authentication"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKey("client-ca-file"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	file := filepath.Join(GinkgoT().TempDir(), "client-ca.crt")
	Expect(os.WriteFile(file, []byte(cm.Data["client-ca-file"]), 0o600)).To(Succeed())
	return file
}

// clusterCertificate is a client certificate the cluster's client CA signed
// (as kubectl users hold), for the user name in the groups.
func clusterCertificate(name string, groups ...string) tls.Certificate {
	GinkgoHelper()
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(u.Config().CertData, u.Config().KeyData)
	Expect(err).NotTo(HaveOccurred())
	return cert
}

// signedCertificate is a client certificate ca signed for the user name.
func signedCertificate(ca *certs.KeyPair, name string) tls.Certificate {
	GinkgoHelper()
	kp, err := certs.NewClient(ca, name, nil, time.Now(), time.Hour)
	Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(kp.CertPEM, kp.KeyPEM)
	Expect(err).NotTo(HaveOccurred())
	return cert
}

// The suite's modelgate takes, besides bearer tokens, client certificates
// the cluster's client CA signed (metrics.clientCAFile): the user is the
// certificate's common name, its groups the organizations, and the same
// SubjectAccessReview decides.
var _ = Describe("metrics scraped with a client certificate", func() {
	It("are served to a certificate metrics.clientCAFile signed, for a user allowed to get /metrics", func() {
		ctx := context.Background()
		ns := namespace(ctx, nil)

		// Bound to modelgate-metrics-reader (config/rbac's, installed by
		// the suite): a user, a group and a service account.
		scraper, group := "metrics-scraper-"+ns, "metrics-scrapers-"+ns
		clientset, err := kubernetes.NewForConfig(adminCfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prometheus"}})).To(Succeed())
		tr, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "prometheus", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Get(ctx, client.ObjectKey{Name: "modelgate-metrics-reader"}, &rbacv1.ClusterRole{})).To(Succeed())
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "metrics-scrapers-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "modelgate-metrics-reader"},
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: scraper},
				{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group},
				{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"},
			},
		}
		Expect(admin.Create(ctx, binding)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(admin.Delete(context.Background(), binding))).To(Succeed()) })

		bound := clusterCertificate(scraper)
		inGroup := clusterCertificate("grouped-"+ns, "some-team", group)
		unbound := clusterCertificate("stranger-" + ns)
		other, err := certs.NewCA("another-ca", time.Now(), time.Hour)
		Expect(err).NotTo(HaveOccurred())
		otherCA := signedCertificate(other, scraper) // the bound name, the wrong CA

		// scrape presents the certificate (nil: none) and the bearer token
		// ("": none), on a connection of its own.
		scrape := func(cert *tls.Certificate, bearer string) (int, string) {
			return getMetrics(ctx, "https://"+metricsAddr+"/metrics", cert, bearer)
		}
		status := func(cert *tls.Certificate, bearer string) func() int {
			return func() int { code, _ := scrape(cert, bearer); return code }
		}
		const metric = "modelgate_mutating_reviews_total"

		// The bound user's certificate: the metrics (Eventually: the
		// metrics server may be starting, and the binding reaching the
		// API server's authorizer).
		Eventually(status(&bound, "")).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
		code, body := scrape(&bound, "")
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(metric))
		// The certificate's organizations are the user's groups.
		code, body = scrape(&inGroup, "")
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(metric))
		// Authenticated, not allowed: 403.
		code, body = scrape(&unbound, "")
		Expect(code).To(Equal(http.StatusForbidden), body)
		Expect(body).To(ContainSubstring("Authorization denied for user stranger-" + ns))
		Expect(body).NotTo(ContainSubstring(metric))
		// The bound name from a CA metrics.clientCAFile does not hold: 401.
		code, body = scrape(&otherCA, "")
		Expect(code).To(Equal(http.StatusUnauthorized), body)
		Expect(body).NotTo(ContainSubstring(metric))
		// No credentials: 401.
		code, body = scrape(nil, "")
		Expect(code).To(Equal(http.StatusUnauthorized), body)
		Expect(body).NotTo(ContainSubstring(metric))
		// Bearer tokens keep working, and a certificate that does not
		// verify does not spoil one that does.
		Eventually(status(nil, tr.Status.Token)).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
		code, body = scrape(&otherCA, tr.Status.Token)
		Expect(code).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(metric))

		// A rotated CA file is picked up without a restart: the new CA's
		// certificates are taken, the old one's no longer.
		original, err := os.ReadFile(metricsClientCAFile)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(os.WriteFile(metricsClientCAFile, original, 0o600)).To(Succeed())
			Eventually(status(&bound, "")).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
		})
		Expect(os.WriteFile(metricsClientCAFile, other.CertPEM, 0o600)).To(Succeed())
		Eventually(status(&otherCA, "")).WithTimeout(30 * time.Second).Should(Equal(http.StatusOK))
		Expect(status(&bound, "")()).To(Equal(http.StatusUnauthorized))
	})
})
