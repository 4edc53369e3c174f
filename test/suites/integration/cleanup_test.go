package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// validatingPodCount is how many validating reviews of Pods modelgate has
// answered, whatever the outcome.
func validatingPodCount() float64 {
	return metricSum("modelgate_validating_reviews_total", map[string]string{"kind": "Pod"})
}

// Issue 15, item 5: cleanup of a GPU Pod must not depend on modelgate. The
// API server does not call it at all for the updates cleanup makes, so
// neither a tighter policy nor modelgate being down can block them.
var _ = Describe("Pod cleanup", func() {
	It("does not call modelgate for a finished Pod's finalizer removal, and does for a label change", func() {
		ctx := context.Background()
		alice := authenticated(aliceName, "system:masters")
		ns := namespace(ctx, map[string]string{annotations.NamespaceTeam: "vision"})
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "finished", Annotations: map[string]string{
			annotations.Inject: "true", annotations.GPU: "2",
		}}).(*corev1.Pod)
		pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
		Expect(alice.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKey(annotations.OwnerLabel))

		mutating, validating := reviewCount("Pod"), validatingPodCount()
		// What the job controller does when the Pod has finished.
		pod.Finalizers = nil
		Expect(alice.Update(ctx, pod)).To(Succeed())
		Expect(reviewCount("Pod")).To(Equal(mutating), "the mutating webhook was called")
		Expect(validatingPodCount()).To(Equal(validating), "the validating webhook was called")

		// The control: a label change is judged by the policies; a change
		// of the owner reaches the mutating webhook, which refuses it.
		pod.Labels["stage"] = "done"
		Expect(alice.Update(ctx, pod)).To(Succeed())
		Expect(validatingPodCount()).To(BeNumerically(">", validating))
		Expect(reviewCount("Pod")).To(Equal(mutating))
		pod.Labels[annotations.OwnerLabel] = "ceo"
		Expect(alice.Update(ctx, pod)).To(Succeed())
		Expect(reviewCount("Pod")).To(BeNumerically(">", mutating))
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.Labels[annotations.OwnerLabel]).NotTo(Equal("ceo"))
	})
})
