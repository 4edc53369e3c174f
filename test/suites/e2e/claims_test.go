package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies/library"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// Issue 42, item 5: a claim is judged at its own admission, so the
// claim a gated Pod names cannot be deleted and created again asking for
// more GPUs than the Pod may hold before the real scheduler allocates it;
// and the update that removes a Pod's scheduling gate is judged against
// its claims as they are then.
var _ = Describe("DRA claims judged themselves", func() {
	It("refuses a gated Pod's claim created again asking for more, denies the gate's removal for a claim that asks for more, and lets the scheduler allocate what the policy allows", func(ctx SpecContext) {
		ns := newNamespace(ctx, "dra-claims")
		// The developer, with modelgate's policy types.
		k8s := warningClient(&env.Warnings{})
		gpuClaim := func(name string, mode resourcev1.DeviceAllocationMode, n int64) *resourcev1.ResourceClaim {
			c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			c.Spec.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: mode, Count: n}}}
			return c
		}
		gatedPod := func(name, claim string) *corev1.Pod {
			p := builders.New("Pod", builders.Options{Namespace: ns, Name: name}).(*corev1.Pod)
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
			p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			return p
		}
		ungate := func(p *corev1.Pod, opts ...client.UpdateOption) error {
			cur := &corev1.Pod{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				return err
			}
			cur.Spec.SchedulingGates = nil
			return k8s.Update(ctx, cur, opts...)
		}

		By("before any policy: Pod gated names claim accel (2 GPUs); Pod late names late-claim, created after it asking for 16")
		Expect(k8s.Create(ctx, gpuClaim("accel", "", 2))).To(Succeed())
		gated := gatedPod("gated", "accel")
		Expect(k8s.Create(ctx, gated)).To(Succeed())
		late := gatedPod("late", "late-claim")
		Expect(k8s.Create(ctx, late)).To(Succeed())
		Expect(k8s.Create(ctx, gpuClaim("late-claim", "", 16))).To(Succeed())

		By("max-gpus-per-pod at 2, for Pods and their claims, in force")
		rego, err := library.FS.ReadFile("max-gpus-per-pod.rego")
		Expect(err).NotTo(HaveOccurred())
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-max-gpus"}}
		wp.Spec.Rego = string(rego)
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Match.Kinds = []string{"Pod", "ResourceClaim", "ResourceClaimTemplate"}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 2}`)}
		enforcePolicy(ctx, k8s, wp)

		By("accel deleted and created again asking for 16, then for every GPU of a node: refused at admission")
		Expect(k8s.Delete(ctx, gpuClaim("accel", "", 2))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "accel"}, &resourcev1.ResourceClaim{}))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
		err = k8s.Create(ctx, gpuClaim("accel", "", 16))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`[` + wp.Name + `] ResourceClaim "accel" asks for 16 GPUs (request "gpu"); at most 2 are allowed per pod in namespace "` + ns + `"`))
		err = k8s.Create(ctx, gpuClaim("accel", resourcev1.DeviceAllocationModeAll, 0))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`[` + wp.Name + `] ResourceClaim "accel" asks for every GPU of a node (request "gpu": allocationMode All of device class "gpu.nvidia.com"); ask for an exact count, at most 2 per pod`))

		By("Pod late's gate removal, its claim asking for 16: denied, and the gate stays")
		const asks16 = `] pod asks for 16 GPUs (container "server"); at most 2 are allowed per pod in namespace "`
		Eventually(func() string {
			if err := ungate(late, client.DryRunAll); err != nil {
				return err.Error()
			}
			return "admitted"
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(ContainSubstring("[" + wp.Name + asks16 + ns + `"`))
		err = ungate(late)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("[" + wp.Name + asks16 + ns + `"`))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(late), late)).To(Succeed())
		Expect(late.Spec.SchedulingGates).To(HaveLen(1))
		Expect(late.Spec.NodeName).To(BeEmpty())

		By("accel created again within the limit: Pod gated's gate goes and the scheduler allocates its 2 GPUs")
		Expect(k8s.Create(ctx, gpuClaim("accel", "", 2))).To(Succeed())
		// The webhook reads the claim from its cache, a moment behind.
		Eventually(func() error { return ungate(gated) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gated), gated)).To(Succeed())
			g.Expect(gated.Spec.NodeName).NotTo(BeEmpty(), "pod %s not scheduled", gated.Name)
			rc := &resourcev1.ResourceClaim{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "accel"}, rc)).To(Succeed())
			g.Expect(rc.Status.Allocation).NotTo(BeNil(), "claim accel is not allocated")
			g.Expect(rc.Status.Allocation.Devices.Results).To(HaveLen(2))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))
})
