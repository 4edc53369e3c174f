package selfcerts_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	servingv1alpha1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/certs"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// Short lifetimes, so that the CA rolls over every ~22s and the serving
// certificate every ~6s while the specs run.
const (
	caLifetime      = 40 * time.Second
	servingLifetime = 12 * time.Second
	renewBefore     = 6 * time.Second
	injectionGrace  = 2 * time.Second
	checkInterval   = time.Second
	loadDuration    = 30 * time.Second
)

func freePort() int32 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// replica is one running modelgate in self mode.
type replica struct {
	addr, readyz string
	stop         context.CancelFunc
	done         chan struct{}
}

// startReplica starts modelgate in self mode, as its service account,
// serving on port.
func startReplica(port int32) *replica {
	GinkgoHelper()
	cfg := config.New()
	cfg.Webhook.Host = "127.0.0.1"
	cfg.Webhook.Port = port
	cfg.Metrics.BindAddress = "0"
	health := fmt.Sprintf("127.0.0.1:%d", freePort())
	cfg.Health.BindAddress = health
	cfg.ShutdownGracePeriod.Duration = 5 * time.Second
	s := &cfg.Certificates.Self
	cfg.Certificates.Mode = config.CertificatesSelf
	s.IPAddresses = []string{"127.0.0.1"}
	s.CALifetime.Duration, s.ServingLifetime.Duration, s.RenewBefore.Duration = caLifetime, servingLifetime, renewBefore
	s.InjectionGrace.Duration, s.CheckInterval.Duration = injectionGrace, checkInterval
	Expect(cfg.Validate()).To(BeEmpty())

	mgr, err := webhook.NewManager(modelgateUser.Config(), cfg)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), readyz: "http://" + health + "/readyz",
		stop: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(r.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		r.stop()
		Eventually(r.done).WithTimeout(20 * time.Second).Should(BeClosed())
	})
	return r
}

func (r *replica) ready() error {
	resp, err := http.Get(r.readyz) //nolint:noctx // a local test endpoint.
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// served is the certificate the replica serves, verified against roots.
func (r *replica) served(roots *x509.CertPool) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", r.addr,
		&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// secretState reads the self-managed Secret.
func secretState(ctx context.Context) (*certs.State, error) {
	s := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: config.DefaultCertSecretName}, s); err != nil {
		return nil, err
	}
	return certs.ReadState(s.Data), nil
}

func pool(cs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range cs {
		p.AddCert(c)
	}
	return p
}

// trusts reports whether a PEM CA bundle holds ca.
func trusts(bundle []byte, ca *x509.Certificate) bool {
	cs, err := certs.ParseCertificates(bundle)
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.Equal(ca) {
			return true
		}
	}
	return false
}

var _ = Describe("self-managed certificates", Ordered, func() {
	var (
		ctx  context.Context
		a, b *replica
		ns   string
	)
	BeforeAll(func() {
		ctx = context.Background()
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: config.DefaultCertSecretName}, &corev1.Secret{})).
			NotTo(Succeed(), "the namespace starts without the Secret")
		// a answers the API server (envtest's webhook and conversion URLs
		// point at this port); b is a second replica racing it. They run
		// for every spec of this container.
		a = startReplica(int32(testEnv.WebhookInstallOptions.LocalServingPort))
		b = startReplica(freePort())
	})

	It("starts from an empty namespace: two replicas converge on one Secret, inject it and both serve it", func() {
		Eventually(a.ready).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(b.ready).WithTimeout(30 * time.Second).Should(Succeed())
		// One replica holds the AIInference controller's Lease; the other
		// is ready and serves all the same.
		lease := &coordinationv1.Lease{}
		Eventually(func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: webhook.LeaderElectionID}, lease)).To(Succeed())
			g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
			g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		state, err := secretState(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(state.CA).NotTo(BeNil())
		Expect(state.Serving).NotTo(BeNil())
		ca := state.CA.Cert

		mut := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: "modelgate-mutating"}, mut)).To(Succeed())
		for _, w := range mut.Webhooks {
			Expect(trusts(w.ClientConfig.CABundle, ca)).To(BeTrue(), "mutating webhook %s trusts the CA", w.Name)
		}
		val := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: "modelgate-validating"}, val)).To(Succeed())
		for _, w := range val.Webhooks {
			Expect(trusts(w.ClientConfig.CABundle, ca)).To(BeTrue(), "validating webhook %s trusts the CA", w.Name)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: "aiinferences.serving.modelgate.io"}, crd)).To(Succeed())
		Expect(trusts(crd.Spec.Conversion.Webhook.ClientConfig.CABundle, ca)).To(BeTrue(), "the CRD conversion trusts the CA")

		expectServingTheSecret(ctx, 10*time.Second, a, b)
	})

	It("is called by the API server: a mutation happens and a conversion works", func() {
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "selfcerts-"}}
		Expect(admin.Create(ctx, nsObj)).To(Succeed())
		ns = nsObj.Name
		// Ready means the bundle is in the webhook configurations and the
		// CRD; the API server takes them from informers, a moment later.
		// Until then it does not trust modelgate and the request fails:
		// wait until a dry run shows the call went through.
		Eventually(func(g Gomega) {
			pod := optedInPod(ns)
			g.Expect(admin.Create(ctx, pod, client.DryRunAll)).To(Succeed())
			g.Expect(pod.Labels).To(HaveKey(annotations.OwnerLabel), "the mutating webhook stamped the owner")
		}).WithTimeout(30 * time.Second).Should(Succeed())

		alpha := &servingv1alpha1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama"},
			Spec:       servingv1alpha1.AIInferenceSpec{ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@main"},
		}
		// Stored as v1: converted by the webhook, once the API server
		// trusts it for the CRD too.
		Eventually(func() error { return admin.Create(ctx, alpha.DeepCopy(), client.DryRunAll) }).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(admin.Create(ctx, alpha)).To(Succeed())
		v1obj := &servingv1.AIInference{}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(alpha), v1obj)).To(Succeed())
		Expect(v1obj.Spec.Model.Revision).To(Equal("main"), "converted to v1 by the webhook")
	})

	It("rotates the CA and the serving certificate while admissions keep running, without a failed request", func() {
		var (
			requests, failures atomic.Int64
			mu                 sync.Mutex
			firstErrors        []string
			servings, cas      = map[string]bool{}, map[string]bool{}
		)
		record := func(err error) {
			requests.Add(1)
			if err != nil {
				failures.Add(1)
				mu.Lock()
				if len(firstErrors) < 5 {
					firstErrors = append(firstErrors, err.Error())
				}
				mu.Unlock()
			}
		}
		deadline := time.Now().Add(loadDuration)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				defer GinkgoRecover()
				for time.Now().Before(deadline) {
					pod := optedInPod(ns)
					err := admin.Create(ctx, pod, client.DryRunAll)
					if err == nil && pod.Labels[annotations.OwnerLabel] == "" {
						err = fmt.Errorf("pod admitted without mutation")
					}
					record(err)
					record(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llama"}, &servingv1alpha1.AIInference{}))
				}
			})
		}
		// The API server keeps its connections to the webhook open, so few
		// of its requests make a new TLS handshake. Fresh handshakes, each
		// checked against the CA bundle the API server has at that moment
		// (read from the webhook configuration just before), prove what a
		// new connection would get, for both replicas.
		var handshakes, untrusted atomic.Int64
		wg.Go(func() {
			defer GinkgoRecover()
			for time.Now().Before(deadline) {
				mut := &admissionregistrationv1.MutatingWebhookConfiguration{}
				if err := admin.Get(ctx, client.ObjectKey{Name: "modelgate-mutating"}, mut); err != nil {
					continue
				}
				bundle, err := certs.ParseCertificates(mut.Webhooks[0].ClientConfig.CABundle)
				if err != nil {
					continue
				}
				for _, r := range []*replica{a, b} {
					handshakes.Add(1)
					if _, err := r.served(pool(bundle)); err != nil {
						untrusted.Add(1)
						record(fmt.Errorf("TLS handshake with %s against the injected bundle: %w", r.addr, err))
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		wg.Go(func() {
			defer GinkgoRecover()
			for time.Now().Before(deadline) {
				if st, err := secretState(ctx); err == nil && st.CA != nil && st.Serving != nil {
					mu.Lock()
					cas[st.CA.Cert.SerialNumber.String()] = true
					servings[st.Serving.Cert.SerialNumber.String()] = true
					mu.Unlock()
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
		wg.Wait()

		report := fmt.Sprintf("%d requests in %s: %d through the API server (dry-run Pod creates mutated by modelgate, AIInference reads converted by modelgate) and %d fresh TLS handshakes checked against the injected bundle (%d untrusted); %d failed in all; %d CAs and %d serving certificates seen",
			requests.Load(), loadDuration, requests.Load()-handshakes.Load(), handshakes.Load(), untrusted.Load(), failures.Load(), len(cas), len(servings))
		AddReportEntry("rotation under load", report)
		fmt.Fprintln(GinkgoWriter, report)
		Expect(len(cas)).To(BeNumerically(">=", 2), "the CA rolled over at least once")
		Expect(len(servings)).To(BeNumerically(">=", 3), "the serving certificate rotated at least twice")
		Expect(requests.Load() - handshakes.Load()).To(BeNumerically(">", 100))
		Expect(handshakes.Load()).To(BeNumerically(">", 100))
		Expect(failures.Load()).To(BeZero(), "first errors: %v", firstErrors)

		By("both replicas still serve the Secret's certificate")
		expectServingTheSecret(ctx, 5*time.Second, a, b)
	})

	It("when every replica is down, refuses what opted in, never kube-system or a workload that neither opted in nor asks for GPUs", func() {
		for _, r := range []*replica{a, b} {
			r.stop()
			Eventually(r.done).WithTimeout(20 * time.Second).Should(BeClosed())
		}
		Eventually(func() error {
			conn, err := net.DialTimeout("tcp", a.addr, time.Second)
			if err == nil {
				conn.Close()
			}
			return err
		}).Should(HaveOccurred(), "nothing listens on the webhook port any more")

		By("an opted-in Pod is refused: the webhooks fail closed")
		Expect(admin.Create(ctx, optedInPod(ns), client.DryRunAll)).NotTo(Succeed())

		By("kube-system, even opted in, and a workload that did not opt in and asks for no GPU are admitted")
		Expect(admin.Create(ctx, optedInPod("kube-system"), client.DryRunAll)).To(Succeed())
		plain := optedInPod(ns)
		plain.Annotations = nil
		Expect(admin.Create(ctx, plain, client.DryRunAll)).To(Succeed())

		By("AIInference reads in v1 need no conversion; in v1alpha1 they do")
		key := client.ObjectKey{Namespace: ns, Name: "llama"}
		Expect(admin.Get(ctx, key, &servingv1.AIInference{})).To(Succeed())
		Expect(admin.Get(ctx, key, &servingv1alpha1.AIInference{})).NotTo(Succeed())
	})
})

// expectServingTheSecret waits until every replica serves the Secret's
// serving certificate, trusted by the Secret's bundle.
func expectServingTheSecret(ctx context.Context, timeout time.Duration, replicas ...*replica) {
	GinkgoHelper()
	for _, r := range replicas {
		Eventually(func(g Gomega) {
			st, err := secretState(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			leaf, err := r.served(pool(st.Bundle))
			g.Expect(err).NotTo(HaveOccurred(), "replica %s serves a certificate the bundle trusts", r.addr)
			g.Expect(leaf.Equal(st.Serving.Cert)).To(BeTrue(), "replica %s serves the Secret's certificate", r.addr)
		}).WithTimeout(timeout).Should(Succeed())
	}
}

// optedInPod is a Pod that opted in to injection: modelgate stamps its
// owner.
func optedInPod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-",
			Annotations: map[string]string{annotations.Inject: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}
