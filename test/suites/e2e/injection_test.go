package e2e_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

var _ = Describe("Opted-in workloads", func() {
	It("become Pods that carry the loader, probes and labels exactly once, on the requested GPUs", func(ctx SpecContext) {
		ns := newNamespace(ctx, "inject")
		// The CronJob first: its controller starts a Job only on the minute.
		kinds := []string{"CronJob", "Deployment", "StatefulSet", "Job"}
		created := map[string]client.Object{}
		for _, kind := range kinds {
			obj := builders.New(kind, builders.Options{
				Namespace: ns, Name: strings.ToLower(kind),
				Annotations: serving("1", map[string]string{annotations.GPUProduct: h100}),
			})
			if cj, ok := obj.(*batchv1.CronJob); ok {
				cj.Spec.Schedule = "* * * * *"
			}
			Expect(k8s.Create(ctx, obj)).To(Succeed())
			// Create leaves the admitted object in obj: its template is
			// what modelgate injected.
			Expect(modelgateKeys(templateOf(obj).Annotations)).To(ContainElement(annotations.Injected), "%s was not injected", kind)
			created[kind] = obj
		}

		for _, kind := range []string{"Deployment", "StatefulSet", "Job"} {
			By(kind + ": its Pod is its injected template, on an H100 node")
			tmpl := templateOf(created[kind])
			Eventually(func(g Gomega) {
				pods := podsOf(ctx, g, ns, strings.ToLower(kind))
				g.Expect(pods).To(HaveLen(1))
				g.Expect(pods[0].Status.Phase).To(BeElementOf(corev1.PodRunning, corev1.PodSucceeded))
				expectInjectedOnce(g, &pods[0], tmpl, 1)
				g.Expect(nodeOf(g, &pods[0]).Labels).To(HaveKeyWithValue(cluster.LabelGPUProduct, h100))
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		}

		By("CronJob: the Job its controller starts, and that Job's Pod, are its injected template")
		cronTmpl := templateOf(created["CronJob"])
		var job batchv1.Job
		Eventually(func(g Gomega) {
			jobs := &batchv1.JobList{}
			g.Expect(k8s.List(ctx, jobs, client.InNamespace(ns))).To(Succeed())
			var fromCron []batchv1.Job
			for _, j := range jobs.Items {
				if owner := metav1.GetControllerOf(&j); owner != nil && owner.Kind == "CronJob" {
					fromCron = append(fromCron, j)
				}
			}
			g.Expect(fromCron).NotTo(BeEmpty())
			job = fromCron[0]
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(job.Spec.Template.Annotations[annotations.Injected]).To(Equal(cronTmpl.Annotations[annotations.Injected]))
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			expectInjectedOnce(g, &pods.Items[0], cronTmpl, 1)
			g.Expect(nodeOf(g, &pods.Items[0]).Labels).To(HaveKeyWithValue(cluster.LabelGPUProduct, h100))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("roll out Pods without the injection when the Deployment's opt-in is deleted", func(ctx SpecContext) {
		ns := newNamespace(ctx, "optout")
		d := builders.New("Deployment", builders.Options{
			Namespace: ns, Name: "llm",
			Annotations: serving("1", map[string]string{annotations.GPUProduct: h100 + "," + a100}),
		}).(*appsv1.Deployment)
		d.Spec.Replicas = ptr.To[int32](2)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		tmpl := d.Spec.Template.DeepCopy()
		for _, p := range runningPods(ctx, ns, "llm", 2) {
			expectInjectedOnce(Default, &p, tmpl, 1)
		}

		By("deleting modelgate.io/inject from the Deployment")
		patch := client.MergeFrom(d.DeepCopy())
		delete(d.Annotations, annotations.Inject)
		Expect(k8s.Patch(ctx, d, patch)).To(Succeed())
		Expect(d.Spec.Template.Annotations).NotTo(HaveKey(annotations.Injected))
		Expect(d.Spec.Template.Spec.InitContainers).To(BeEmpty())

		By("the rollout replaces every Pod with one without the injection, off the GPU nodes")
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "llm")
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.DeletionTimestamp).To(BeNil())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				expectNotInjected(g, &p)
				// Without GPUs or the toleration, the tainted GPU nodes
				// are out of reach.
				g.Expect(nodeOf(g, &p).Labels).NotTo(HaveKey(cluster.LabelGPUPresent))
			}
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		Expect(d.Status.UpdatedReplicas).To(Equal(int32(2)))
	}, SpecTimeout(3*time.Minute))
})
