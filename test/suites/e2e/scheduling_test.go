package e2e_test

import (
	"context"
	"strconv"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// deployment builds an annotated Deployment with replicas.
func deployment(ns, name string, replicas int32, a map[string]string) *appsv1.Deployment {
	d := builders.New("Deployment", builders.Options{Namespace: ns, Name: name, Annotations: a}).(*appsv1.Deployment)
	d.Spec.Replicas = ptr.To(replicas)
	return d
}

// unschedulable returns the scheduler's message on a pod it could not
// place, or "" while it has not said so.
func unschedulable(p *corev1.Pod) string {
	if c := cluster.NotScheduled(p); c != nil && c.Reason == corev1.PodReasonUnschedulable {
		return c.Message
	}
	return ""
}

// placed counts the running pods, checked by running, and the ones the
// scheduler could not place, whose reason pending checks.
func placed(pods []corev1.Pod, running func(*corev1.Pod), pending func(reason string)) (int, int) {
	r, p := 0, 0
	for i := range pods {
		pod := &pods[i]
		switch {
		case pod.Status.Phase == corev1.PodRunning:
			r++
			running(pod)
		case pod.Spec.NodeName == "" && unschedulable(pod) != "":
			p++
			pending(unschedulable(pod))
		}
	}
	return r, p
}

var _ = Describe("Scheduling", func() {
	It("places Pods only on nodes of the requested GPU product, and leaves the rest Pending when those are full", func(ctx SpecContext) {
		ns := newNamespace(ctx, "product")
		// Two A100 nodes of 4 GPUs hold four pods of 2; the fifth must wait
		// although the H100 nodes have 16 GPUs free.
		d := deployment(ns, "a100", 5, serving("2", map[string]string{annotations.GPUProduct: a100}))
		Expect(k8s.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "a100")
			g.Expect(pods).To(HaveLen(5))
			running, pending := placed(pods, func(p *corev1.Pod) {
				expectInjectedOnce(g, p, &d.Spec.Template, 2)
				g.Expect(nodeOf(g, p).Labels).To(HaveKeyWithValue(cluster.LabelGPUProduct, a100), "pod %s", p.Name)
			}, func(reason string) {
				g.Expect(reason).To(And(ContainSubstring("Insufficient nvidia.com/gpu"), ContainSubstring("didn't match Pod's node affinity")))
			})
			g.Expect([]int{running, pending}).To(Equal([]int{4, 1}), "running and pending pods")
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(3*time.Minute))

	It("places Pods only on nodes with at least the requested GPU memory", func(ctx SpecContext) {
		ns := newNamespace(ctx, "memory")
		// 40000 MiB rules out the T4s (15360); 80000 leaves only the H100s.
		// Spread over the 8 and 16 free GPUs, an unconstrained set of 8
		// would use the T4 node's 4 and the least loaded ones.
		for _, c := range []struct {
			name   string
			minMiB int
			n      int32
		}{{"over-40g", 40000, 8}, {"over-80g", 80000, 4}} {
			Expect(k8s.Create(ctx, deployment(ns, c.name, c.n, serving("1", map[string]string{
				annotations.GPUMemory: strconv.Itoa(c.minMiB),
			})))).To(Succeed())
			for _, p := range runningPods(ctx, ns, c.name, int(c.n)) {
				mem, err := strconv.Atoi(nodeOf(Default, &p).Labels[cluster.LabelGPUMemory])
				Expect(err).NotTo(HaveOccurred())
				Expect(mem).To(BeNumerically(">=", c.minMiB), "pod %s on %s", p.Name, p.Spec.NodeName)
			}
		}
	}, SpecTimeout(3*time.Minute))

	It("leaves Pods asking for more GPUs than any node has Pending, with the scheduler's reason", func(ctx SpecContext) {
		ns := newNamespace(ctx, "toobig")
		Expect(k8s.Create(ctx, deployment(ns, "toobig", 1, serving("16", nil)))).To(Succeed())
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "toobig")
			g.Expect(pods).To(HaveLen(1))
			pod = pods[0]
			g.Expect(unschedulable(&pod)).To(ContainSubstring("Insufficient nvidia.com/gpu"))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
		Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&pod), &pod)).To(Succeed())
			g.Expect(pod.Spec.NodeName).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
	}, SpecTimeout(2*time.Minute))

	It("runs a Job's Pods to completion on the requested GPUs", func(ctx SpecContext) {
		ns := newNamespace(ctx, "job")
		job := builders.New("Job", builders.Options{Namespace: ns, Name: "eval",
			Annotations: serving("1", map[string]string{annotations.GPUProduct: t4})}).(*batchv1.Job)
		job.Spec.Completions, job.Spec.Parallelism = ptr.To[int32](6), ptr.To[int32](3)
		Expect(k8s.Create(ctx, job)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
			g.Expect(job.Status.Conditions).To(ContainElement(And(
				HaveField("Type", batchv1.JobComplete), HaveField("Status", corev1.ConditionTrue))))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(job.Status.Succeeded).To(Equal(int32(6)))
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
		Expect(pods.Items).To(HaveLen(6))
		for _, p := range pods.Items {
			Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s", p.Name)
			expectInjectedOnce(Default, &p, &job.Spec.Template, 1)
			Expect(nodeOf(Default, &p).Labels).To(HaveKeyWithValue(cluster.LabelGPUProduct, t4))
		}
	}, SpecTimeout(2*time.Minute))

	It("schedules workloads that did not opt in exactly as without modelgate", func(ctx SpecContext) {
		// The control: a namespace modelgate ignores (the API server never
		// calls it there). The same objects in an ordinary namespace must
		// come out, and be placed, the same.
		plain := newNamespace(ctx, "plain")
		control := newNamespace(ctx, "control")
		ignoreNamespace(ctx, control)

		// A CPU service, and a GPU one written by hand: the GPU limit and
		// the taint's toleration, but no modelgate.io/ annotation.
		cpu := func(ns string) *appsv1.Deployment {
			d := deployment(ns, "cpu", 2, nil)
			d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			return d
		}
		gpu := func(ns string) *appsv1.Deployment {
			d := deployment(ns, "gpu", 2, nil)
			d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{cluster.ResourceGPU: resource.MustParse("1")}
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{
				Key: string(cluster.ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			d.Spec.Template.Spec.NodeSelector = map[string]string{cluster.LabelGPUProduct: a100}
			return d
		}
		for _, build := range []func(string) *appsv1.Deployment{cpu, gpu} {
			got, want := build(plain), build(control)
			Expect(k8s.Create(ctx, got)).To(Succeed())
			Expect(k8s.Create(ctx, want)).To(Succeed())
			Expect(cmp.Diff(want.Spec.Template, got.Spec.Template)).To(BeEmpty(), "%s's template (-control +plain)", got.Name)
			Expect(modelgateKeys(got.Labels)).To(BeEmpty())
			Expect(modelgateKeys(got.Annotations)).To(BeEmpty())

			gotPods := runningPods(ctx, plain, got.Name, 2)
			wantPods := runningPods(ctx, control, want.Name, 2)
			for i := range gotPods {
				p, w := &gotPods[i], &wantPods[i]
				expectNotInjectedUnlessAsked(p, w)
				Expect(nodeClass(p)).To(Equal(nodeClass(w)), "pod %s on %s, control on %s", p.Name, p.Spec.NodeName, w.Spec.NodeName)
			}
		}
	}, SpecTimeout(3*time.Minute))
})

// ignoreNamespace labels a namespace modelgate.io/ignore and returns once
// the API server no longer calls modelgate there: it sees the label
// through its namespace informer, a moment after the update. A dry run of
// an opted-in Pod then comes back as written, and modelgate's count of
// reviews does not move.
func ignoreNamespace(ctx context.Context, ns string) {
	GinkgoHelper()
	obj := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	obj.Labels[annotations.NamespaceIgnore] = "true"
	Expect(k8s.Update(ctx, obj)).To(Succeed())
	reviews := map[string]string{"kind": "Pod"}
	Eventually(func(g Gomega) {
		before := modelgateMetric(ctx, g, "modelgate_mutating_reviews_total", reviews)
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "ignored", Annotations: serving("1", nil)})
		g.Expect(k8s.Create(ctx, p, client.DryRunAll)).To(Succeed())
		g.Expect(p.GetAnnotations()).NotTo(HaveKey(annotations.Injected), "modelgate injected a Pod in namespace %s", ns)
		g.Expect(modelgateMetric(ctx, g, "modelgate_mutating_reviews_total", reviews)).To(Equal(before), "the API server called modelgate for a Pod in namespace %s", ns)
	}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// expectNotInjectedUnlessAsked compares a pod with its control: the same
// spec but for the node it is bound to, its hostname and its service
// account token's volume (named anew for each Pod), and no modelgate.io/
// key.
func expectNotInjectedUnlessAsked(p, control *corev1.Pod) {
	got, want := withoutServiceAccountToken(&p.Spec), withoutServiceAccountToken(&control.Spec)
	got.NodeName, want.NodeName = "", ""
	Expect(cmp.Diff(want, got)).To(BeEmpty(), "pod spec of %s (-control +plain)", p.Name)
	Expect(modelgateKeys(p.Labels)).To(BeEmpty(), "labels of %s", p.Name)
	Expect(modelgateKeys(p.Annotations)).To(BeEmpty(), "annotations of %s", p.Name)
}

// nodeClass is the kind of node a pod landed on: its GPU product, or
// "cpu".
func nodeClass(p *corev1.Pod) string {
	if prod := nodeOf(Default, p).Labels[cluster.LabelGPUProduct]; prod != "" {
		return prod
	}
	return "cpu"
}
