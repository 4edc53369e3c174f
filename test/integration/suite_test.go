// Package integration_test proves modelgate's admission behaviour through a
// real kube-apiserver and etcd (envtest): the webhook configurations are
// rendered from config/webhook and installed, and the real modelgate
// webhook server runs in this process behind real TLS.
package integration_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/modelgate/modelgate/test/env"
	"github.com/modelgate/modelgate/webhook"
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "modelgate admission through a real API server")
}

var (
	testEnv *envtest.Environment
	// admin is a cluster-admin client (envtest's own user).
	admin    client.Client
	adminCfg *rest.Config
	cancel   context.CancelFunc
	stopped  chan struct{}
	// metricsAddr is where the suite's modelgate serves its metrics:
	// securely, as installs do, checking scrapers' tokens with the
	// permissions config/rbac grants it.
	metricsAddr string
	// metricsClientCAFile is the suite's metrics.clientCAFile: the
	// cluster's client CA (metrics_clientcert_test.go).
	metricsClientCAFile string
	// modelgateCfg authenticates as modelgate's service account, with
	// config/rbac's permissions only.
	modelgateCfg *rest.Config
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))

	root, err := env.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	testEnv, err = env.New(root)
	Expect(err).NotTo(HaveOccurred())

	started := time.Now()
	adminCfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("envtest start", time.Since(started).Round(time.Millisecond).String())

	admin, err = client.New(adminCfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())

	wio := testEnv.WebhookInstallOptions
	cfg := env.Configuration(testEnv)
	cfg.Injection.Profiles = testProfiles
	// Exceptions expire within a spec: 1s of clock skew allowed.
	cfg.Policy.Exceptions.ClockSkew = &metav1.Duration{Duration: time.Second}
	metricsAddr = fmt.Sprintf("127.0.0.1:%d", freePort())
	cfg.Metrics.BindAddress = metricsAddr
	Expect(*cfg.Metrics.Secure).To(BeTrue())
	metricsClientCAFile = clusterClientCA(context.Background())
	cfg.Metrics.ClientCAFile = metricsClientCAFile
	Expect(cfg.Validate()).To(BeEmpty())

	// modelgate runs as its own service account, with config/rbac's
	// permissions only.
	modelgateUser, err := env.ModelgateIdentity(context.Background(), testEnv, admin, root)
	Expect(err).NotTo(HaveOccurred())
	modelgateCfg = modelgateUser.Config()
	mgr, err := webhook.NewManager(modelgateCfg, cfg)
	Expect(err).NotTo(HaveOccurred())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	stopped = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()

	// The API server calls the webhook over TLS: wait until it answers.
	addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	Eventually(func() error {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr,
			&tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return fmt.Errorf("webhook server not up: %w", err)
		}
		return conn.Close()
	}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
		Eventually(stopped).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
