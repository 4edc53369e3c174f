package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/standins/dradriver"
)

// dra asks for the GPUs through a resource claim.
func dra(extra map[string]string) map[string]string {
	out := map[string]string{annotations.GPUAllocation: string(annotations.AllocationDRA)}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// allocatedProducts are the productName attributes of the devices the
// pod's GPU claim was allocated, read from the node's ResourceSlice.
func allocatedProducts(ctx context.Context, g Gomega, p *corev1.Pod) []string {
	var name string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == gpuclaim.ClaimName && s.ResourceClaimName != nil {
			name = *s.ResourceClaimName
		}
	}
	g.Expect(name).NotTo(BeEmpty(), "pod %s has no claim of its own yet", p.Name)
	var rc resourcev1.ResourceClaim
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &rc)).To(Succeed())
	g.Expect(rc.Status.Allocation).NotTo(BeNil(), "claim %s is not allocated", name)
	slice := dradriver.SliceFor(nodeOf(g, p))
	g.Expect(slice).NotTo(BeNil())
	var out []string
	for _, r := range rc.Status.Allocation.Devices.Results {
		g.Expect(r.Pool).To(Equal(p.Spec.NodeName), "device %s of claim %s is from another node's pool", r.Device, name)
		i := slices.IndexFunc(slice.Spec.Devices, func(d resourcev1.Device) bool { return d.Name == r.Device })
		g.Expect(i).To(BeNumerically(">=", 0))
		out = append(out, *slice.Spec.Devices[i].Attributes["productName"].StringValue)
	}
	return out
}

// Issue 31, item 2: the real scheduler allocates DRA claims from the stand-in
// driver's ResourceSlices.
var _ = Describe("GPUs through DRA", func() {
	It("places claimed Pods only where their product's devices are free, and leaves the rest Pending with the scheduler's reason", func(ctx SpecContext) {
		ns := newNamespace(ctx, "dra-product")
		// The two A100 nodes have 4 devices each: four pods of 2, and a fifth
		// that waits although the H100 nodes have 16 free.
		d := deployment(ns, "a100", 5, serving("2", dra(map[string]string{annotations.GPUProduct: a100})))
		Expect(k8s.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "a100")
			g.Expect(pods).To(HaveLen(5))
			running, pending := placed(pods, func(p *corev1.Pod) {
				g.Expect(nodeOf(g, p).Labels).To(HaveKeyWithValue(cluster.LabelGPUProduct, a100), "pod %s", p.Name)
				g.Expect(allocatedProducts(ctx, g, p)).To(Equal([]string{"NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"}))
				g.Expect(p.Spec.Containers[0].Resources.Limits).NotTo(HaveKey(cluster.ResourceGPU))
			}, func(reason string) {
				g.Expect(reason).To(ContainSubstring("cannot allocate all claims"))
			})
			g.Expect([]int{running, pending}).To(Equal([]int{4, 1}), "running and pending pods")
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("places claimed Pods only on devices with at least the requested memory", func(ctx SpecContext) {
		ns := newNamespace(ctx, "dra-memory")
		// 40000 MiB rules out the T4s (15360 MiB each).
		Expect(k8s.Create(ctx, deployment(ns, "over-40g", 6, serving("1", dra(map[string]string{annotations.GPUMemory: "40000"}))))).To(Succeed())
		for _, p := range runningPods(ctx, ns, "over-40g", 6) {
			Expect(nodeOf(Default, &p).Labels[cluster.LabelGPUProduct]).NotTo(Equal(t4), "pod %s", p.Name)
		}
	}, SpecTimeout(3*time.Minute))

	It("still places device-plugin Pods on the right product where a node offers its GPUs through DRA only (KEP-5004)", func(ctx SpecContext) {
		ns := newNamespace(ctx, "dra-extended")
		// gpu-l4-dra-0 has no nvidia.com/gpu capacity: the scheduler serves
		// the limit modelgate writes from its ResourceSlice, through the
		// gpu.nvidia.com DeviceClass's extendedResourceName.
		const l4 = "NVIDIA-L4"
		Expect(k8s.Create(ctx, deployment(ns, "l4", 2, serving("2", map[string]string{annotations.GPUProduct: l4})))).To(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "l4")
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				g.Expect(nodeOf(g, &p).Labels).To(HaveKeyWithValue(cluster.LabelGPUProduct, l4))
				g.Expect(p.Spec.Containers[0].Resources.Limits).To(HaveKey(cluster.ResourceGPU), "modelgate's device-plugin injection")
				g.Expect(p.Spec.ResourceClaims).To(BeEmpty())
				st := p.Status.ExtendedResourceClaimStatus
				g.Expect(st).NotTo(BeNil(), "pod %s: the scheduler made no claim for nvidia.com/gpu", p.Name)
				var rc resourcev1.ResourceClaim
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: st.ResourceClaimName}, &rc)).To(Succeed())
				g.Expect(rc.Status.Allocation).NotTo(BeNil())
				g.Expect(rc.Status.Allocation.Devices.Results).To(HaveLen(2))
				for _, r := range rc.Status.Allocation.Devices.Results {
					g.Expect(r.Pool).To(Equal(p.Spec.NodeName))
				}
			}
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("starts a Deployment of 8 claimed Pods about as fast as 8 device-plugin ones", func(ctx SpecContext) {
		ns := newNamespace(ctx, "dra-speed")
		timeToRunning := func(name string, a map[string]string) time.Duration {
			start := time.Now()
			Expect(k8s.Create(ctx, deployment(ns, name, 8, serving("1", a)))).To(Succeed())
			Eventually(func(g Gomega) {
				pods := podsOf(ctx, g, ns, name)
				g.Expect(pods).To(HaveLen(8))
				for _, p := range pods {
					g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				}
			}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
			return time.Since(start)
		}
		h := map[string]string{annotations.GPUProduct: h100}
		plugin := timeToRunning("device-plugin", h)
		claims := timeToRunning("dra", dra(h))
		AddReportEntry("time to Running, 8 replicas of 1 H100", fmt.Sprintf("device plugin %s, DRA %s",
			plugin.Round(time.Millisecond), claims.Round(time.Millisecond)))

		By("a Pod whose template does not exist yet waits for it only moments")
		// A template nobody made before: a count no other spec asks for.
		start := time.Now()
		Expect(k8s.Create(ctx, deployment(ns, "fresh-template", 1, serving("3", dra(h))))).To(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "fresh-template")
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Status.ResourceClaimStatuses).To(ContainElement(HaveField("ResourceClaimName", Not(BeNil()))))
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(20 * time.Millisecond).Should(Succeed())
		AddReportEntry("Deployment created to its Pod's claim made from a new template", time.Since(start).Round(time.Millisecond).String())
	}, SpecTimeout(3*time.Minute))
})
