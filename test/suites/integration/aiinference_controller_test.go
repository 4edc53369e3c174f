package integration_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	servingv1alpha1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/controller/aiinference"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// The AIInference controller, run against the suite's API server and
// modelgate webhooks (which decorate what it applies), as modelgate serve
// runs it: as modelgate's service account with config/rbac's permissions
// alone, from a cache holding only labelled children (webhook.CacheOptions),
// in a manager of its own limited to one namespace so that the other
// specs' AIInferences are left to them.
var _ = Describe("the AIInference controller", Ordered, func() {
	var (
		ctx     context.Context
		stop    context.CancelFunc
		done    <-chan struct{}
		ns      string
		rec     *aiinference.Reconciler
		metrics *prometheus.Registry
		// looks counts the controller's looks for the AIInference API.
		looks  int
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
		opts := webhook.CacheOptions()
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
		mgr, err := ctrl.NewManager(modelgateCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Cache: opts})
		Expect(err).NotTo(HaveOccurred())
		metrics = prometheus.NewRegistry()
		rec = aiinference.NewReconciler(mgr, nil, metrics)
		// As if the CRD came after modelgate: the first looks find no
		// AIInference API, and the controller joins the running manager
		// once it is served (modelgate serve's path when the CRD is there
		// at start runs in the e2e suite).
		served := func() (bool, error) {
			looks++
			if looks < 3 {
				return false, nil
			}
			return aiinference.Served(mgr)
		}
		Expect(rec.SetupWhenServed(mgr, served, 100*time.Millisecond)).To(Succeed())
		stop, done = runManager(mgr)
	})
	AfterAll(func() {
		stop()
		Eventually(done).Should(BeClosed())
	})

	// failed waits until the AIInference is Failed for the reason, with
	// the message in its Ready condition, stamped with its generation.
	failed := func(name, reason, message string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			got := stored(name)
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhaseFailed))
			cond := meta.FindStatusCondition(got.Status.Conditions, aiinference.ConditionReady)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(reason))
			g.Expect(cond.Message).To(ContainSubstring(message))
			g.Expect(cond.ObservedGeneration).To(Equal(got.Generation))
		}).Should(Succeed())
	}
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
		Expect(looks).To(Equal(3), "the controller started once the API was served, after two looks that found none")
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
		owner := stored("llama").Labels[annotations.OwnerLabel]
		Expect(owner).NotTo(BeEmpty())
		Expect(d.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, owner),
			"the AIInference's creator owns its Deployment, not modelgate's service account")
		Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, owner))

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
		reviews := reviewCount("Deployment")
		for range 20 {
			_, err := rec.Reconcile(ctx, reconcile.Request{NamespacedName: key})
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(reviewCount("Deployment")).To(Equal(reviews),
			"a settled Deployment was sent to the webhook again (a dry run): nothing had changed on either side")
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
		failed("taken", aiinference.ReasonNameConflict, "not controlled by this AIInference")
		Expect(c.Get(ctx, client.ObjectKeyFromObject(taken), taken)).To(Succeed())
		Expect(taken.ResourceVersion).To(Equal(version), "the other Deployment was written")
	})

	It("serves an AIInference written in v1alpha1 like one written in v1", func() {
		old := &servingv1alpha1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-alpha"},
			Spec: servingv1alpha1.AIInferenceSpec{
				ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@" + llamaRevision,
				Engine:      "vllm",
				GPU:         &servingv1alpha1.GPU{ProductLabel: "NVIDIA-A100-SXM4-80GB", Count: 1},
			},
		}
		Expect(c.Create(ctx, old)).To(Succeed())
		d := &appsv1.Deployment{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "llama-alpha"}, d) }).Should(Succeed())
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.Model, "hf://meta-llama/Llama-3.1-8B-Instruct@"+llamaRevision))
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.GPUProduct, "NVIDIA-A100-SXM4-80GB"))
		Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(old), old)).To(Succeed())
			g.Expect(string(old.Status.Phase)).To(Equal(string(servingv1.PhasePending)), "the status reads the same in v1alpha1")
			g.Expect(old.Status.ObservedGeneration).To(Equal(old.Generation))
		}).Should(Succeed())
	})

	It("records events for the children it writes and the phases it reports, and counts the phases", func() {
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			reasons, notes := map[string]bool{}, []string{}
			for _, e := range list.Items {
				if e.Regarding.Kind == "AIInference" && e.Regarding.Name == "llama" {
					reasons[e.Reason] = true
					notes = append(notes, e.Note)
				}
			}
			g.Expect(reasons).To(HaveKey("CreatedDeployment"))
			g.Expect(reasons).To(HaveKey("CreatedService"))
			g.Expect(notes).To(ContainElement(HavePrefix(string(servingv1.PhasePending)+": ")), "the phase it reported, with the Ready condition's message")
		}).Should(Succeed())
		families, err := metrics.Gather()
		Expect(err).NotTo(HaveOccurred())
		pending := 0.0
		for _, f := range families {
			if f.GetName() != "modelgate_aiinference_phase" {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == string(servingv1.PhasePending) {
					pending = m.GetGauge().GetValue()
				}
			}
		}
		Expect(pending).To(BeNumerically(">=", 2), "llama and llama-alpha are Pending")
	})

	It("reports a policy's denial of the Deployment as Failed, with the policy's message", func() {
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: uniqueName("no-denied")}}
		wp.Spec.Rego = "package test.nodenied\n\ndeny contains \"this namespace serves no model named denied\" if input.workload.name == \"denied\"\n"
		wp.Spec.EnforcementAction = policyv1.EnforcementActionDeny
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Match.Kinds = []string{"Deployment"}
		applyPolicy(ctx, c, wp)
		Expect(c.Create(ctx, llama("denied"))).To(Succeed())
		failed("denied", aiinference.ReasonPolicyDenied, "this namespace serves no model named denied")
		Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "denied"}, &appsv1.Deployment{}))).To(BeTrue())
	})
})
