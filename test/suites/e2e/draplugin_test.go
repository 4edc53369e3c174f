package e2e_test

import (
	"maps"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/standins/dradriver"
	"github.com/modelgate/modelgate/test/standins/draplugin"
)

// The real node offers its GPUs through DRA too: test/standins/draplugin, the
// stand-in for NVIDIA's kubelet plugin, publishes its ResourceSlice and
// prepares claims as CDI specs that the node's containerd applies.
var _ = Describe("On the real node, GPUs through DRA", func() {
	It("a Pod with modelgate's DRA annotations runs with the device the scheduler allocated from the node's ResourceSlice: the DRA plugin prepares it, containerd applies its CDI spec, deleting the Pod unprepares it", func(ctx SpecContext) {
		n := realNode()
		plugin := n.DRAPlugin()
		Expect(plugin).NotTo(BeNil(), "the real node runs no DRA plugin")
		ns := newNamespace(ctx, "real-dra")
		a := map[string]string{annotations.Inject: "true", annotations.GPU: "1"}
		maps.Copy(a, dra(nil))
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "dra", Annotations: a}).(*corev1.Pod)
		metav1.SetMetaDataLabel(&p.ObjectMeta, "app", "dra")
		p.Spec.Containers[0].Image = "modelgate/test-engine:1"
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", `echo "gpus=$NVIDIA_VISIBLE_DEVICES claim=$MODELGATE_DRA_CLAIM"; sleep infinity`}
		onRealNode(&p.Spec)
		Expect(k8s.Create(ctx, p)).To(Succeed())

		pod := readyPod(ctx, ns, "dra", 2*time.Minute)
		Expect(pod.Spec.NodeName).To(Equal(n.Name))
		c := container(Default, pod.Spec.Containers, servingContainer)
		Expect(c.Resources.Claims).To(ConsistOf(HaveField("Name", gpuclaim.ClaimName)))
		Expect(c.Resources.Limits).NotTo(HaveKey(cluster.ResourceGPU), "a device-plugin GPU would set the variable too")

		By("the scheduler allocated one device of the real node's pool, from the plugin's ResourceSlice")
		var claimName string
		for _, s := range pod.Status.ResourceClaimStatuses {
			if s.Name == gpuclaim.ClaimName && s.ResourceClaimName != nil {
				claimName = *s.ResourceClaimName
			}
		}
		Expect(claimName).NotTo(BeEmpty(), "the Pod's claim")
		var rc resourcev1.ResourceClaim
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, &rc)).To(Succeed())
		Expect(rc.Status.Allocation).NotTo(BeNil())
		results := rc.Status.Allocation.Devices.Results
		Expect(results).To(HaveLen(1))
		Expect(results[0].Driver).To(Equal(dradriver.Driver))
		Expect(results[0].Pool).To(Equal(n.Name), "the device is from the real node's pool")
		list := &resourcev1.ResourceSliceList{}
		Expect(k8s.List(ctx, list, client.MatchingFields{
			resourcev1.ResourceSliceSelectorNodeName: n.Name, resourcev1.ResourceSliceSelectorDriver: dradriver.Driver,
		})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Spec.Devices).To(HaveLen(n.GPUs))
		var uuid string
		for _, d := range list.Items[0].Spec.Devices {
			if d.Name == results[0].Device {
				uuid = *d.Attributes["uuid"].StringValue
				Expect(*d.Attributes["productName"].StringValue).To(Equal("NVIDIA H100 80GB HBM3"))
			}
		}
		Expect(uuid).To(HavePrefix("GPU-"), "device %s in the node's slice", results[0].Device)

		By("the plugin prepared that device for the claim, and containerd applied its CDI edits")
		var prep draplugin.Preparation
		Expect(plugin.Prepared()).To(ContainElement(HaveField("UID", rc.UID), &prep))
		Expect(prep.Devices).To(ConsistOf(And(
			HaveField("Device", results[0].Device), HaveField("Pool", n.Name), HaveField("UUID", uuid),
			HaveField("CDIDeviceID", HavePrefix("k8s.gpu.nvidia.com/gpu="+string(rc.UID))),
		)))
		Expect(prep.SpecFile).To(BeAnExistingFile())
		Expect(strings.TrimSpace(execIn(ctx, &pod, servingContainer, "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES"))).To(Equal(uuid))
		Expect(strings.TrimSpace(execIn(ctx, &pod, servingContainer, "sh", "-c", "echo $MODELGATE_DRA_CLAIM"))).To(Equal(ns + "/" + claimName))
		Expect(podLogs(ctx, &pod, servingContainer)).To(ContainSubstring("gpus=" + uuid + " claim=" + ns + "/" + claimName))

		By("deleting the Pod: the kubelet has the plugin unprepare the claim, which removes its CDI spec")
		Expect(k8s.Delete(ctx, &pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(plugin.Unprepared()).To(ContainElement(And(HaveField("UID", rc.UID), HaveField("Devices", prep.Devices))))
			g.Expect(plugin.Prepared()).NotTo(ContainElement(HaveField("UID", rc.UID)))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		_, err := os.Stat(prep.SpecFile)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the claim's CDI spec %s: %v", prep.SpecFile, err)
	}, SpecTimeout(3*time.Minute))
})
