package integration_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/internal/controller/aiinference"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/env"
)

// The AIInference controller, run against the suite's API server and
// modelgate webhooks (which decorate what it applies). Not yet part of
// modelgate serve: it runs here in a manager of its own.
var _ = Describe("the AIInference controller", Ordered, func() {
	var (
		ctx    context.Context
		stop   context.CancelFunc
		done   chan struct{}
		ns     string
		rec    *aiinference.Reconciler
		c      client.Client
		stored = func(name string) *servingv1.AIInference {
			GinkgoHelper()
			ai := &servingv1.AIInference{}
			Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ai)).To(Succeed())
			return ai
		}
	)
	BeforeAll(func() {
		ctx = context.Background()
		ns = namespace(ctx, nil)
		s, err := env.Scheme()
		Expect(err).NotTo(HaveOccurred())
		c, err = client.New(adminCfg, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
		// Its own namespace only: the other specs' AIInferences are theirs.
		mgr, err := ctrl.NewManager(adminCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}})
		Expect(err).NotTo(HaveOccurred())
		rec = &aiinference.Reconciler{Client: mgr.GetClient(), Scheme: s}
		Expect(rec.SetupWithManager(mgr)).To(Succeed())
		var mctx context.Context
		mctx, stop = context.WithCancel(ctx)
		done = make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mctx)).To(Succeed())
		}()
	})
	AfterAll(func() {
		stop()
		Eventually(done).Should(BeClosed())
	})

	llama := func(name string) *servingv1.AIInference {
		return &servingv1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: servingv1.AIInferenceSpec{
				Model:  servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: llamaRevision},
				Engine: servingv1.EngineSpec{Name: servingv1.EngineVLLM},
				GPU:    &servingv1.GPUSpec{Count: 1, Products: []string{"NVIDIA-A100-SXM4-80GB"}},
			},
		}
	}

	It("creates an owned Deployment and Service, decorated once by the webhook, and reports the phase", func() {
		ai := llama("llama")
		Expect(c.Create(ctx, ai)).To(Succeed())
		d := &appsv1.Deployment{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llama"}, d) }).Should(Succeed())
		Expect(metav1.IsControlledBy(d, ai)).To(BeTrue(), "the AIInference controls its Deployment: garbage collection deletes it")
		loaders := 0
		for _, c := range d.Spec.Template.Spec.InitContainers {
			if c.Name == mutators.ModelLoaderName {
				loaders++
			}
		}
		Expect(loaders).To(Equal(1), "the webhook injected the loader, once")
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("meta-llama/Llama-3.1-8B-Instruct"))
		svc := &corev1.Service{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llama"}, svc) }).Should(Succeed())
		Expect(metav1.IsControlledBy(svc, ai)).To(BeTrue())

		Eventually(func(g Gomega) {
			got := stored("llama")
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhasePending), "no Pod runs in envtest")
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, aiinference.ConditionReady)).NotTo(BeNil())
			g.Expect(got.Status.Selector).To(Equal(aiinference.InferenceLabel + "=llama"))
		}).Should(Succeed())
	})

	It("never writes an unchanged AIInference's children: 20 reconciles, the same resourceVersions", func() {
		key := client.ObjectKey{Namespace: ns, Name: "llama"}
		d, svc, ai := &appsv1.Deployment{}, &corev1.Service{}, &servingv1.AIInference{}
		// Settled: the status written, nothing left to do.
		Eventually(func(g Gomega) {
			_, err := rec.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Get(ctx, key, ai)).To(Succeed())
			before := ai.ResourceVersion
			_, err = rec.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Get(ctx, key, ai)).To(Succeed())
			g.Expect(ai.ResourceVersion).To(Equal(before))
		}).Should(Succeed())
		Expect(c.Get(ctx, key, d)).To(Succeed())
		Expect(c.Get(ctx, key, svc)).To(Succeed())
		versions := []string{d.ResourceVersion, svc.ResourceVersion, ai.ResourceVersion}
		for range 20 {
			_, err := rec.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(c.Get(ctx, key, d)).To(Succeed())
		Expect(c.Get(ctx, key, svc)).To(Succeed())
		Expect(c.Get(ctx, key, ai)).To(Succeed())
		Expect([]string{d.ResourceVersion, svc.ResourceVersion, ai.ResourceVersion}).To(Equal(versions),
			"the Deployment, Service and AIInference were written although nothing changed")
	})

	It("rolls out a spec change and keeps what others set (kubectl rollout restart)", func() {
		key := client.ObjectKey{Namespace: ns, Name: "llama"}
		restart := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, "2026-11-24T08:00:00Z")
		Expect(c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama"}},
			client.RawPatch(types.StrategicMergePatchType, []byte(restart)))).To(Succeed())
		ai := stored("llama")
		ai.Spec.Engine.Args = []string{"--max-model-len", "8192"}
		ai.Spec.Replicas = ptr.To[int32](3)
		Expect(c.Update(ctx, ai)).To(Succeed())
		Eventually(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(c.Get(ctx, key, d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--max-model-len", "8192"))
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](3)))
			g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/restartedAt", "2026-11-24T08:00:00Z"),
				"a field the controller never sets survives its apply")
			g.Expect(stored("llama").Status.ObservedGeneration).To(Equal(ai.Generation))
		}).Should(Succeed())
	})

	It("leaves alone a Deployment of the same name it does not control, and says so", func() {
		taken := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/theirs:1"}}},
				},
			},
		}
		Expect(c.Create(ctx, taken)).To(Succeed())
		version := taken.ResourceVersion
		Expect(c.Create(ctx, llama("taken"))).To(Succeed())
		Eventually(func(g Gomega) {
			got := stored("taken")
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhaseFailed))
			c := meta.FindStatusCondition(got.Status.Conditions, aiinference.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(aiinference.ReasonNameConflict))
			g.Expect(c.Message).To(ContainSubstring("not controlled by this AIInference"))
		}).Should(Succeed())
		Expect(c.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
		Expect(taken.ResourceVersion).To(Equal(version), "the other Deployment was written")
	})
})
