package integration_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/env"

	"github.com/modelgate/modelgate/test/builders"
	"github.com/modelgate/modelgate/webhook"
	"github.com/modelgate/modelgate/webhook/config"
)

// freePort returns a local TCP port nobody listens on.
func freePort() int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

var _ = Describe("modelgate serve", Ordered, func() {
	var (
		cfg         *config.Configuration
		cancelFn    context.CancelFunc
		done        chan struct{}
		addr        string
		firstSerial *big.Int
		inFlight    = make(chan struct{})
	)

	BeforeAll(func() {
		cfg = config.New()
		cfg.Webhook.Host = "127.0.0.1"
		cfg.Webhook.Port = freePort()
		certDir, err := os.MkdirTemp("", "modelgate-serve-certs-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, certDir)
		cfg.Webhook.CertDir = certDir
		firstSerial = writeServingCert(cfg.Webhook.CertDir)
		cfg.Metrics.BindAddress = fmt.Sprintf("127.0.0.1:%d", freePort())
		cfg.Health.BindAddress = fmt.Sprintf("127.0.0.1:%d", freePort())
		cfg.ShutdownGracePeriod.Duration = 10 * time.Second
		addr = net.JoinHostPort(cfg.Webhook.Host, strconv.Itoa(int(cfg.Webhook.Port)))

		mgr, err := webhook.NewManager(adminCfg, cfg)
		Expect(err).NotTo(HaveOccurred())
		// A review that takes a while, to be caught by the shutdown.
		mgr.GetWebhookServer().Register("/slow", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			close(inFlight)
			time.Sleep(2 * time.Second)
			_, _ = io.WriteString(w, "finished")
		}))
		var ctx context.Context
		ctx, cancelFn = context.WithCancel(context.Background())
		done = make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(ctx)).To(Succeed())
		}()
	})

	// Whatever specs ran, stop this manager before the suite stops the API
	// server (the shutdown spec may already have stopped it).
	AfterAll(func() {
		cancelFn()
		Eventually(done).WithTimeout(15 * time.Second).Should(BeClosed())
	})

	It("becomes ready once it serves TLS and its namespace cache has synced", func() {
		url := "http://" + cfg.Health.BindAddress
		Eventually(func() (int, error) {
			resp, err := http.Get(url + "/readyz") //nolint:noctx // a test probe.
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			return resp.StatusCode, nil
		}).WithTimeout(20 * time.Second).Should(Equal(http.StatusOK))
		resp, err := http.Get(url + "/healthz") //nolint:noctx // a test probe.
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
	})

	It("serves Prometheus metrics over HTTPS only to callers allowed to get /metrics", func() {
		ctx := context.Background()
		// One review, so modelgate's counters have a sample to show.
		ns := namespace(ctx, nil)
		Expect(admin.Create(ctx, builders.New("Pod",
			builders.Options{Namespace: ns, Name: "metrics", Annotations: optIn}))).To(Succeed())

		// Two service accounts, one bound to modelgate-metrics-reader, with
		// tokens the API server issues (TokenRequest).
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
		repo, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		roleYAML, err := os.ReadFile(filepath.Join(repo, "config", "rbac", "metrics_reader_role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var role rbacv1.ClusterRole
		Expect(yaml.Unmarshal(roleYAML, &role)).To(Succeed())
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, &role))).To(Succeed())
		Expect(admin.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "modelgate-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "prometheus"}},
		})).To(Succeed())

		// controller-runtime's self-signed certificate: trust is not the point here.
		httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a test probe.
		scrape := func(bearer string) (int, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+cfg.Metrics.BindAddress+"/metrics", nil)
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
		Eventually(func() int { code, _ := scrape(""); return code }).Should(Equal(http.StatusUnauthorized))
		// controller-runtime's filter answers a token the API server
		// rejects outright with 500 ("Authentication failed"): no metrics
		// either way.
		code, body := scrape("not-a-token")
		Expect(code).NotTo(Equal(http.StatusOK))
		Expect(body).NotTo(ContainSubstring("modelgate_"))
		code, _ = scrape(stranger)
		Expect(code).To(Equal(http.StatusForbidden))
		Eventually(func() int { code, _ := scrape(reader); return code }).Should(Equal(http.StatusOK))
		_, body = scrape(reader)
		Expect(body).To(ContainSubstring("controller_runtime_webhook_requests_total"))
		Expect(body).To(ContainSubstring("modelgate_mutating_reviews_total"))

		// Plain HTTP is not served.
		_, err = http.Get("http://" + cfg.Metrics.BindAddress + "/metrics") //nolint:noctx // a test probe.
		if err == nil {
			c, _ := scrape("")
			Expect(c).NotTo(Equal(http.StatusOK))
		}
	})

	It("picks up a rotated serving certificate without a restart", func() {
		serving := func() (*big.Int, error) {
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
		}
		Expect(serving()).To(Equal(firstSerial))
		rotated := writeServingCert(cfg.Webhook.CertDir)
		Eventually(serving).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Equal(rotated))
	})

	It("refuses TLS older than 1.2", func() {
		_, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11})
		Expect(err).To(HaveOccurred())
	})

	It("speaks HTTP/1.1 only, even to a client that offers HTTP/2", func() {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		Expect(conn.ConnectionState().NegotiatedProtocol).To(Equal("http/1.1"))
		Expect(conn.ConnectionState().Version).To(BeNumerically(">=", tls.VersionTLS12))
	})

	It("lets an in-flight review finish when it is stopped", func() {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		type result struct {
			body string
			err  error
		}
		got := make(chan result, 1)
		go func() {
			resp, err := c.Post("https://"+addr+"/slow", "application/json", nil) //nolint:noctx // a test request.
			if err != nil {
				got <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			got <- result{body: string(b), err: err}
		}()
		Eventually(inFlight).WithTimeout(10 * time.Second).Should(BeClosed())
		cancelFn()
		var r result
		Eventually(got).WithTimeout(15 * time.Second).Should(Receive(&r))
		Expect(r.err).NotTo(HaveOccurred())
		Expect(r.body).To(Equal("finished"))
		Eventually(done).WithTimeout(15 * time.Second).Should(BeClosed())

		// And once stopped, it no longer accepts connections.
		_, err := net.DialTimeout("tcp", addr, time.Second)
		Expect(err).To(HaveOccurred())
	})
})
