package integration_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/controller/claimtemplates"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// claimTemplateController is the name of modelgate's GPU claim template
// controller (controller/claimtemplates), the controller label of its
// metrics.
const claimTemplateController = "gpu-claim-templates"

// Issue 31, item 1: the same GPU annotations, allocated through DRA.
var _ = Describe("GPUs through DRA", Ordered, func() {
	var (
		ctx   context.Context
		ns    string
		alice client.Client
	)
	draAnnotations := func(gpus string) map[string]string {
		return map[string]string{
			annotations.Inject: "true", annotations.GPU: gpus, annotations.GPUProduct: h100,
			annotations.GPUMemory: "81920", annotations.GPUAllocation: "dra",
		}
	}
	BeforeAll(func() {
		ctx = context.Background()
		ns = namespace(ctx, nil)
		u, err := testEnv.AddUser(envtest.User{Name: "alice-dra@example.com", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		alice, err = client.New(u.Config(), client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
	})

	It("gives a Deployment's pods a claim in place of the extended resource and node affinity", func() {
		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llama", Annotations: draAnnotations("2")}).(*appsv1.Deployment)
		Expect(alice.Create(ctx, d)).To(Succeed())
		spec := d.Spec.Template.Spec
		Expect(spec.ResourceClaims).To(HaveLen(1))
		claim := spec.ResourceClaims[0]
		Expect(claim.Name).To(Equal(gpuclaim.ClaimName))
		Expect(claim.ResourceClaimTemplateName).NotTo(BeNil())
		Expect(*claim.ResourceClaimTemplateName).To(HavePrefix(gpuclaim.TemplatePrefix + "2-"))
		Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(gpuclaim.TemplateLabel, *claim.ResourceClaimTemplateName))
		server := spec.Containers[0]
		Expect(server.Resources.Claims).To(ConsistOf(corev1.ResourceClaim{Name: gpuclaim.ClaimName}))
		Expect(server.Resources.Limits).NotTo(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
		Expect(spec.Affinity).To(BeNil())
		// GPU node pools stay tainted whichever way GPUs are handed out.
		Expect(spec.Tolerations).To(ConsistOf(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))

		By("opting out: every part goes")
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Annotations[annotations.Inject] = "false"
		Expect(alice.Update(ctx, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.ResourceClaims).To(BeEmpty())
		Expect(d.Spec.Template.Spec.Containers[0].Resources.Claims).To(BeEmpty())
		Expect(d.Spec.Template.Labels).NotTo(HaveKey(gpuclaim.TemplateLabel))
		Expect(d.Spec.Template.Spec.Tolerations).To(BeEmpty())
	})

	It("creates the template a Pod's claim names, in the Pod's namespace, within moments", func() {
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "server", Annotations: draAnnotations("2")}).(*corev1.Pod)
		Expect(alice.Create(ctx, pod)).To(Succeed())
		created := time.Now()
		name := *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName
		var t resourcev1.ResourceClaimTemplate
		Eventually(func() error {
			return admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &t)
		}).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
		AddReportEntry("GPU claim template created after the Pod", time.Since(created).Round(time.Millisecond).String())
		Expect(t.Labels).To(HaveKeyWithValue(gpuclaim.ManagedByLabel, gpuclaim.ManagedBy))
		Expect(t.Annotations).To(HaveKeyWithValue(gpuclaim.RequestAnnotation, "2 GPUs of "+h100+", at least 81920 MiB each"))
		reqs := t.Spec.Spec.Devices.Requests
		Expect(reqs).To(HaveLen(1))
		Expect(reqs[0].Exactly).NotTo(BeNil())
		Expect(reqs[0].Exactly.DeviceClassName).To(Equal("gpu.nvidia.com"))
		Expect(reqs[0].Exactly.Count).To(Equal(int64(2)))
		Expect(reqs[0].Exactly.Selectors).To(HaveLen(2))
		Expect(reqs[0].Exactly.Selectors[0].CEL.Expression).To(ContainSubstring(`"NVIDIA H100 80GB HBM3"`))
		Expect(reqs[0].Exactly.Selectors[1].CEL.Expression).To(ContainSubstring(`quantity("81920Mi")`))
	})

	It("makes no template for a Pod that carries the label by hand", func() {
		name := gpuclaim.TemplatePrefix + "8-0123456789"
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "forged", Labels: map[string]string{gpuclaim.TemplateLabel: name}}).(*corev1.Pod)
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &name}}
		Expect(alice.Create(ctx, pod)).To(Succeed())

		// Proof that the controller has looked at the forged Pod, rather
		// than a wait: a Pod modelgate injected, created after it, comes
		// through the same informer, so its template key is queued after
		// the forged one (one queue, in order). Once that template exists
		// the forged Pod's reconcile has started; once no reconcile runs,
		// it has finished.
		control := builders.New("Pod", builders.Options{Namespace: ns, Name: "control", Annotations: draAnnotations("3")}).(*corev1.Pod)
		Expect(alice.Create(ctx, control)).To(Succeed())
		controlTemplate := client.ObjectKey{Namespace: ns, Name: *control.Spec.ResourceClaims[0].ResourceClaimTemplateName}
		Eventually(func() error { return admin.Get(ctx, controlTemplate, &resourcev1.ResourceClaimTemplate{}) }).Should(Succeed())
		Eventually(func() float64 { return activeWorkers(claimTemplateController) }).Should(BeZero())
		Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &resourcev1.ResourceClaimTemplate{}))).
			To(BeTrue(), "a template was made for the forged label")
	})

	It("refuses a product the Configuration cannot map, naming the annotation, the value and the products accepted", func() {
		a := draAnnotations("1")
		a[annotations.GPUProduct] = "ACME-X1"
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "acme", Annotations: a}).(*corev1.Pod)
		err := alice.Create(ctx, pod)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(
			ContainSubstring(`metadata.annotations[modelgate.io/gpu-product]: Invalid value: "ACME-X1"`),
			ContainSubstring("NVIDIA-H100-80GB-HBM3")))
	})

	It("holds DRA pods to max-gpus-per-pod as device-plugin ones, the user's own claims included", func() {
		rego, err := os.ReadFile(filepath.Join("..", "..", "..", "policies", "library", "max-gpus-per-pod.rego"))
		Expect(err).NotTo(HaveOccurred())
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "max-gpus-dra"}}
		wp.Spec.Rego = string(rego)
		wp.Spec.EnforcementAction = policyv1.EnforcementActionDeny
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 2}`)}
		applyPolicy(ctx, alice, wp)

		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "four", Annotations: draAnnotations("4")}).(*corev1.Pod)
		err = alice.Create(ctx, pod)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`[max-gpus-dra] pod asks for 4 GPUs`))
		ok := builders.New("Pod", builders.Options{Namespace: ns, Name: "two", Annotations: draAnnotations("2")}).(*corev1.Pod)
		Expect(alice.Create(ctx, ok)).To(Succeed())

		By("a template of the user's own that asks for 8")
		own := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eight"}}
		own.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "g", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 8}}}
		Expect(admin.Create(ctx, own)).To(Succeed())
		user := builders.New("Pod", builders.Options{Namespace: ns, Name: "user-claim"}).(*corev1.Pod)
		user.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "accel", ResourceClaimTemplateName: &own.Name}}
		user.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "accel"}}
		Eventually(func() string {
			err := alice.Create(ctx, user.DeepCopy())
			if err == nil {
				return "admitted"
			}
			return err.Error()
		}).Should(ContainSubstring(`[max-gpus-dra] pod asks for 8 GPUs`))

		By("a claim whose template does not exist is refused, not let through uncounted")
		missing := builders.New("Pod", builders.Options{Namespace: ns, Name: "missing"}).(*corev1.Pod)
		missing.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "accel", ResourceClaimTemplateName: ptrTo("nowhere")}}
		missing.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "accel"}}
		err = alice.Create(ctx, missing)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`uses resource claim "accel", whose ResourceClaimTemplate or ResourceClaim was not found`))
	})
})

// Unused templates go after the idle time; the user's are never touched,
// not even one that carries modelgate's managed-by label (issue 42, item
// 6): only a template whose seal proves modelgate made it is deleted.
var _ = Describe("GPU claim template clean-up", func() {
	It("deletes the template it made once no Pod has named it for the idle time, and leaves the user's, labelled as modelgate's or not", func(ctx SpecContext) {
		ns := namespace(ctx, nil)
		// The templates are sealed with the key modelgate keeps in its
		// Secret.
		var s corev1.Secret
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: webhook.RecordKeySecret}, &s)).To(Succeed())
		key, err := seal.New(s.Data[webhook.RecordKeyField])
		Expect(err).NotTo(HaveOccurred())

		By("the suite's modelgate creates, sealed, the template an injected Pod names")
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "server", Annotations: map[string]string{
			annotations.Inject: "true", annotations.GPU: "1", annotations.GPUProduct: h100, annotations.GPUAllocation: "dra",
		}}).(*corev1.Pod)
		Expect(admin.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.ResourceClaims).To(HaveLen(1))
		ours := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName}}
		Eventually(func() error { return admin.Get(ctx, client.ObjectKeyFromObject(ours), ours) }).Should(Succeed())
		Expect(ours.Labels).To(HaveKeyWithValue(gpuclaim.ManagedByLabel, gpuclaim.ManagedBy))
		Expect(gpuclaim.Sealed(key, ours)).To(BeTrue(), "the template modelgate created, as the API server returns it, carries no valid seal: %v", ours.Annotations)
		// Unscheduled, the Pod goes at once; then no Pod names the template.
		Expect(admin.Delete(ctx, pod)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}).Should(BeTrue())

		By("the user's templates: one carrying modelgate's managed-by label, one without")
		mk := func(name string, lbls map[string]string) *resourcev1.ResourceClaimTemplate {
			t := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
			t.Spec.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 1}}}
			Expect(admin.Create(ctx, t)).To(Succeed())
			return t
		}
		labelled := mk(gpuclaim.TemplatePrefix+"1-aaaaaaaaaa", map[string]string{gpuclaim.ManagedByLabel: gpuclaim.ManagedBy})
		plain := mk(gpuclaim.TemplatePrefix+"1-bbbbbbbbbb", nil)

		// The suite's controller waits out claimtemplates.Idle (10 minutes):
		// this one, with the same key, waits a second.
		const idle = time.Second
		r := &claimtemplates.Reconciler{Client: admin, Pods: admin, Seal: key, Idle: idle}
		reconcileAll := func() (ourWait time.Duration) {
			GinkgoHelper()
			for _, t := range []*resourcev1.ResourceClaimTemplate{ours, labelled, plain} {
				res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)})
				Expect(err).NotTo(HaveOccurred())
				if t == ours {
					ourWait = res.RequeueAfter
				} else {
					Expect(res.RequeueAfter).To(BeZero(), "%s: the user's template is waited on, as one to delete", t.Name)
				}
			}
			return ourWait
		}
		unused := time.Now()
		Expect(reconcileAll()).To(BeNumerically(">", 0), "an unused template waits out the idle time")
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(ours), &resourcev1.ResourceClaimTemplate{})).To(Succeed(), "modelgate's template went before the idle time")
		// Reconciled again until it goes, as its requeues would.
		Eventually(func() bool {
			reconcileAll()
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(ours), &resourcev1.ResourceClaimTemplate{}))
		}).WithPolling(100*time.Millisecond).Should(BeTrue(), "modelgate's unused template stayed")
		Expect(time.Since(unused)).To(BeNumerically(">=", idle), "modelgate's template went before the idle time")
		// Once more, past the idle time: the user's still stay.
		reconcileAll()
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(labelled), &resourcev1.ResourceClaimTemplate{})).To(Succeed(),
			"the user's template carrying the managed-by label was deleted")
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(plain), &resourcev1.ResourceClaimTemplate{})).To(Succeed(), "the user's template was deleted")
	})
})

func ptrTo[T any](v T) *T { return &v }
