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
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	// What the specs wait for (a watch event, a reconcile, a compile)
	// takes what the machine takes: half a minute, not gomega's default
	// second, before a condition that does not come is a failure.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
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
	// served are what the suite's modelgate judges with: the engine whose
	// policy set its validating webhook evaluates, and the namespace cache
	// its webhooks read. The specs wait on them to know that a policy or a
	// namespace label is in force (helpers_test.go).
	served webhook.Parts
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))

	root, err := env.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	testEnv, err = env.New(root)
	Expect(err).NotTo(HaveOccurred())
	// The API server presents a client certificate to the webhooks at one
	// address (admission_clientcert_test.go).
	apiServerClient = presentAdmissionClientCertificate(testEnv)

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
	healthAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	cfg.Health.BindAddress = healthAddr
	Expect(cfg.Validate()).To(BeEmpty())

	// modelgate runs as its own service account, with config/rbac's
	// permissions only.
	modelgateUser, err := env.ModelgateIdentity(context.Background(), testEnv, admin, root)
	Expect(err).NotTo(HaveOccurred())
	modelgateCfg = modelgateUser.Config()
	mgr, err := webhook.NewManager(modelgateCfg, cfg, func(_ manager.Manager, _ *config.Configuration, parts webhook.Parts) error {
		served = parts
		return nil
	})
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
	// Ready: the namespace cache synced, the WorkloadPolicies and
	// exceptions that exist loaded. The specs read no state modelgate has
	// not loaded yet.
	Eventually(func() int { code, _ := readyz(healthAddr); return code }).WithTimeout(time.Minute).Should(Equal(http.StatusOK))
	probeNS := namespace(context.Background(), nil)
	// The probe labelNamespace asks whether the API server sees a label.
	installNamespaceLabelsProbe(context.Background(), probeNS)
	// The API server loads webhook configurations through a watch: envtest
	// created them a moment before modelgate started, and only a review
	// that reaches modelgate shows the API server has them. A dry-run
	// opted-in GPU Pod goes through both configurations: the mutating one
	// stamps its owner and the validating one counts a review.
	Eventually(func(g Gomega) {
		validating := validatingPodCount()
		pod := builders.New("Pod", builders.Options{Namespace: probeNS, Name: "webhooks-loaded", Annotations: optIn}).(*corev1.Pod)
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		g.Expect(admin.Create(context.Background(), pod, client.DryRunAll)).To(Succeed())
		g.Expect(pod.Labels).To(HaveKey(annotations.OwnerLabel), "the mutating webhooks are not loaded")
		g.Expect(validatingPodCount()).To(BeNumerically(">", validating), "the validating webhooks are not loaded")
	}).WithTimeout(time.Minute).Should(Succeed())
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
