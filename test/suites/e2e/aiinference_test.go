package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/controller/aiinference"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// The AIInference controller in the simulated cluster: modelgate serve
// runs it (as its own service account, holding the leader Lease), the
// kube-controller-manager turns its Deployments into Pods, the scheduler
// places them on the fake GPU nodes and kwok plays their kubelets.
var _ = Describe("AIInferences", func() {
	var ai client.Client
	BeforeEach(func() {
		s, err := env.Scheme()
		Expect(err).NotTo(HaveOccurred())
		ai, err = client.New(gpuCluster.Developer, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
	})
	// aiNamespace is newNamespace whose AIInferences are deleted first
	// after the spec, so that the controller does not recreate the
	// Deployments newNamespace's cleanup deletes.
	aiNamespace := func(ctx context.Context, prefix string) string {
		ns := newNamespace(ctx, prefix)
		DeferCleanup(func(ctx SpecContext) {
			Expect(ai.DeleteAllOf(ctx, &servingv1.AIInference{}, client.InNamespace(ns))).To(Succeed())
			Eventually(func(g Gomega) {
				var list servingv1.AIInferenceList
				g.Expect(ai.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
				g.Expect(list.Items).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}, NodeTimeout(time.Minute))
		return ns
	}
	get := func(ctx context.Context, g Gomega, ns, name string) *servingv1.AIInference {
		got := &servingv1.AIInference{}
		g.Expect(ai.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got)).To(Succeed())
		return got
	}
	pods := func(ctx context.Context, g Gomega, ns, name string) []corev1.Pod {
		list := &corev1.PodList{}
		g.Expect(k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{annotations.InferenceLabel: name})).To(Succeed())
		return list.Items
	}
	// ready waits for the AIInference to be Ready with every replica, and
	// returns it.
	ready := func(ctx context.Context, ns, name string, replicas int32) *servingv1.AIInference {
		GinkgoHelper()
		var got *servingv1.AIInference
		Eventually(func(g Gomega) {
			got = get(ctx, g, ns, name)
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhaseReady), "conditions: %+v", got.Status.Conditions)
			g.Expect(got.Status.ReadyReplicas).To(Equal(replicas))
			g.Expect(got.Status.Replicas).To(Equal(replicas))
			g.Expect(got.Status.ModelLoaded).To(BeTrue())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		return got
	}
	vllm := func(ns, name string, replicas int32, gpus int32, products ...string) *servingv1.AIInference {
		return &servingv1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: servingv1.AIInferenceSpec{
				Model:    servingv1.ModelSpec{URI: "hf://Qwen/Qwen2.5-0.5B-Instruct", Revision: "7ae557604adf67be50417f59c2c2f167def9a775"},
				Engine:   servingv1.EngineSpec{Name: servingv1.EngineVLLM},
				GPU:      &servingv1.GPUSpec{Count: gpus, Products: products},
				Replicas: ptr.To(replicas),
			},
		}
	}

	It("from config/samples, in all three versions, become Ready with Running Pods on the requested GPUs", func(ctx SpecContext) {
		ns := aiNamespace(ctx, "samples")
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, f := range []string{"serving_v1alpha1_aiinference.yaml", "serving_v1beta1_aiinference.yaml", "serving_v1_aiinference.yaml"} {
			b, err := os.ReadFile(filepath.Join(root, "config", "samples", f))
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(b, &u.Object)).To(Succeed())
			u.SetNamespace(ns)
			Expect(ai.Create(ctx, u)).To(Succeed(), f)
			names = append(names, u.GetName())
		}
		for _, name := range names {
			spec := get(ctx, Default, ns, name).Spec
			got := ready(ctx, ns, name, *spec.Replicas)
			AddReportEntry("time to Ready, "+name, got.Status.LastTransitionTime.Sub(got.CreationTimestamp.Time).String())
			for _, p := range pods(ctx, Default, ns, name) {
				Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				Expect(nodeOf(Default, &p).Labels[cluster.LabelGPUProduct]).To(BeElementOf(spec.GPU.Products), "pod %s on %s", p.Name, p.Spec.NodeName)
				server := container(Default, p.Spec.Containers, aiinference.ServingContainer)
				Expect(server.Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value()).To(Equal(int64(spec.GPU.Count)))
				Expect(named(p.Spec.InitContainers, mutators.ModelLoaderName)).To(Equal(1), "pod %s: the loader, once", p.Name)
				Expect(p.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, developerName), "the AIInference's creator owns its Pods")
			}
		}

		// The fixed point, in a running cluster: Pods and ReplicaSets
		// keep changing status, the controller keeps reconciling, and the
		// Deployments are never written.
		reviews := modelgateMetric(ctx, Default, "modelgate_mutating_reviews_total", map[string]string{"kind": "Deployment"})
		Expect(reviews).To(BeNumerically(">=", len(names)), "the controller's Deployments went through the webhook")
		versions := map[string]string{}
		for _, name := range names {
			d := &appsv1.Deployment{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
			versions[name] = d.ResourceVersion
		}
		Consistently(func(g Gomega) {
			for _, name := range names {
				d := &appsv1.Deployment{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
				g.Expect(d.ResourceVersion).To(Equal(versions[name]), "Deployment %s was written", name)
			}
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
		Expect(modelgateMetric(ctx, Default, "modelgate_mutating_reviews_total", map[string]string{"kind": "Deployment"})).To(Equal(reviews),
			"a settled Deployment went through the webhook again (a dry run)")
		Expect(modelgateMetric(ctx, Default, "modelgate_aiinference_phase", map[string]string{"phase": "Ready"})).To(BeNumerically(">=", len(names)))
	}, SpecTimeout(4*time.Minute))

	It("stays Pending with the scheduler's reason when no node fits", func(ctx SpecContext) {
		ns := aiNamespace(ctx, "nofit")
		Expect(ai.Create(ctx, vllm(ns, "toobig", 1, 16))).To(Succeed())
		Eventually(func(g Gomega) {
			got := get(ctx, g, ns, "toobig")
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhasePending))
			c := meta.FindStatusCondition(got.Status.Conditions, aiinference.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(aiinference.ReasonUnschedulable))
			g.Expect(c.Message).To(ContainSubstring("Insufficient nvidia.com/gpu"))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("scale through the subresource, roll out a spec change and a rollout restart, and go with everything they made", func(ctx SpecContext) {
		ns := aiNamespace(ctx, "lifecycle")
		key := client.ObjectKey{Namespace: ns, Name: "qwen"}
		Expect(ai.Create(ctx, vllm(ns, "qwen", 1, 1, a100))).To(Succeed())
		ready(ctx, ns, "qwen", 1)

		By("kubectl scale: the AIInference's scale subresource")
		scale := &autoscalingv1.Scale{}
		Expect(ai.SubResource("scale").Get(ctx, get(ctx, Default, ns, "qwen"), scale)).To(Succeed())
		Expect(scale.Status.Selector).To(Equal(annotations.InferenceLabel + "=qwen"))
		scale.Spec.Replicas = 3
		Expect(ai.SubResource("scale").Update(ctx, get(ctx, Default, ns, "qwen"), client.WithSubResourceBody(scale))).To(Succeed())
		ready(ctx, ns, "qwen", 3)
		Consistently(func(g Gomega) {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, key, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(Equal(ptr.To[int32](3)), "the controller keeps the scaled replicas")
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())

		By("a spec change rolls out")
		Eventually(func() error {
			got := get(ctx, Default, ns, "qwen")
			got.Spec.Engine.Args = []string{"--max-model-len", "4096"}
			return ai.Update(ctx, got)
		}).WithContext(ctx).Should(Succeed())
		Eventually(func(g Gomega) {
			ps := pods(ctx, g, ns, "qwen")
			g.Expect(ps).To(HaveLen(3))
			for _, p := range ps {
				g.Expect(container(g, p.Spec.Containers, aiinference.ServingContainer).Args).To(ContainElements("--max-model-len", "4096"))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			}
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		ready(ctx, ns, "qwen", 3)

		By("kubectl rollout restart completes and is not reverted")
		at := time.Now().UTC().Format(time.RFC3339)
		restart := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, at)
		Expect(k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "qwen"}},
			client.RawPatch(types.StrategicMergePatchType, []byte(restart)))).To(Succeed())
		Eventually(func(g Gomega) {
			ps := pods(ctx, g, ns, "qwen")
			g.Expect(ps).To(HaveLen(3))
			for _, p := range ps {
				g.Expect(p.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/restartedAt", at))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			}
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, key, d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("kubectl.kubernetes.io/restartedAt", at))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(3)))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		ready(ctx, ns, "qwen", 3)

		By("deleting the AIInference removes its Deployment, Service and Pods")
		Expect(ai.Delete(ctx, get(ctx, Default, ns, "qwen"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key, &appsv1.Deployment{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key, &corev1.Service{}))).To(BeTrue())
			g.Expect(pods(ctx, g, ns, "qwen")).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(6*time.Minute))

	// kwok marks every Pod on its nodes ready; this spec's Pod lands on a
	// node kwok does not manage, whose kubelet the spec plays by writing
	// the Pod's status as a kubelet would: the loader running, then
	// exiting 1 with its termination message, then crash-looping.
	It("report Loading while the loader runs and Failed with its message when it fails", func(ctx SpecContext) {
		const product = "NVIDIA-L4-BY-HAND"
		node := handNode(ctx, product)
		ns := aiNamespace(ctx, "loader")
		// No kubelet confirms the deletion of a Pod on that node: after the
		// spec, its Pods go at once, once the AIInference and the
		// ReplicaSets that would make new ones are gone.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(ai.Delete(ctx, &servingv1.AIInference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}}))).To(Succeed())
			Eventually(func(g Gomega) {
				rs := &appsv1.ReplicaSetList{}
				g.Expect(k8s.List(ctx, rs, client.InNamespace(ns))).To(Succeed())
				g.Expect(rs.Items).To(BeEmpty(), "the garbage collector has not removed the ReplicaSets yet")
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
			Eventually(func(g Gomega) {
				for _, p := range pods(ctx, g, ns, "broken") {
					g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, &p, client.GracePeriodSeconds(0)))).To(Succeed())
				}
				g.Expect(pods(ctx, g, ns, "broken")).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}, NodeTimeout(2*time.Minute))
		Expect(ai.Create(ctx, vllm(ns, "broken", 1, 1, product))).To(Succeed())
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			ps := pods(ctx, g, ns, "broken")
			g.Expect(ps).To(HaveLen(1))
			pod = ps[0]
			g.Expect(pod.Spec.NodeName).To(Equal(node))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		phase := func(want servingv1.Phase, reason string, message ...string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				got := get(ctx, g, ns, "broken")
				c := meta.FindStatusCondition(got.Status.Conditions, aiinference.ConditionReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect([]string{string(got.Status.Phase), c.Reason}).To(Equal([]string{string(want), reason}), "message: %s", c.Message)
				for _, m := range message {
					g.Expect(c.Message).To(ContainSubstring(m))
				}
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		now := metav1.Now()
		loader := corev1.ContainerStatus{Name: mutators.ModelLoaderName, Image: pod.Spec.InitContainers[0].Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
		server := corev1.ContainerStatus{Name: aiinference.ServingContainer, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
		kubelet := func(loader corev1.ContainerStatus) {
			GinkgoHelper()
			Eventually(func() error {
				p := &corev1.Pod{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(&pod), p); err != nil {
					return err
				}
				p.Status.Phase = corev1.PodPending
				p.Status.StartTime = &now
				p.Status.Conditions = []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: corev1.PodInitialized, Status: corev1.ConditionFalse, Reason: "ContainersNotInitialized", LastTransitionTime: now},
					{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: now},
				}
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{loader}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{server}
				return k8s.Status().Update(ctx, p)
			}).WithContext(ctx).Should(Succeed())
		}
		kubelet(loader)
		phase(servingv1.PhaseLoading, aiinference.ReasonLoading)

		const words = "modelgate load: hf://Qwen/Qwen2.5-0.5B-Instruct: 401 Unauthorized: the repository is gated; set modelgate.io/model-credentials"
		exited := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: words, StartedAt: now, FinishedAt: metav1.Now()}
		loader.State = corev1.ContainerState{Terminated: exited}
		kubelet(loader)
		phase(servingv1.PhaseFailed, aiinference.ReasonLoaderFailed, "exited with code 1", words)

		loader.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s restarting failed container"}}
		loader.LastTerminationState = corev1.ContainerState{Terminated: exited}
		loader.RestartCount = 1
		kubelet(loader)
		phase(servingv1.PhaseFailed, aiinference.ReasonLoaderFailed, "is crash-looping", words)
	}, SpecTimeout(3*time.Minute))
})

// handNode registers a GPU node kwok does not manage (it has no
// cluster.FakeNodeAnnotation), Ready, with one GPU of the product, and a
// Lease so that the node lifecycle controller sees it alive for the spec.
// It is deleted after the spec.
func handNode(ctx context.Context, product string) string {
	GinkgoHelper()
	name := "by-hand-" + strings.ToLower(strings.ReplaceAll(product, "_", "-"))
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
		cluster.LabelGPUProduct: product, "nvidia.com/gpu.memory": "23034",
	}}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("1"),
	}
	now := metav1.Now()
	// The node lifecycle controller taints a new node at once: write the
	// status over its latest version.
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
		}}
		return k8s.Status().Update(ctx, n)
	}).WithContext(ctx).Should(Succeed())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](120),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	Expect(k8s.Create(ctx, lease)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, lease))).To(Succeed()) })
	return name
}
