package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// maxGPUsPerPod denies pods asking for more GPUs than input.parameters.max.
const maxGPUsPerPod = `package e2e.ratchet

deny contains sprintf("%s asks for %d GPUs, at most %d", [input.workload.name, input.workload.gpu.count, input.parameters.max]) if {
	input.workload.gpu.count > input.parameters.max
}
`

var _ = Describe("ratcheting", func() {
	It("lets a controller label a running 8-GPU Pod after max GPUs was tightened to 4, with a warning, and counts it", func(ctx SpecContext) {
		warned := &env.Warnings{}
		c := warningClient(warned)

		ns := newNamespace(ctx, "ratchet")
		d := deployment(ns, "gpu8", 1, serving("8", nil))
		Expect(c.Create(ctx, d)).To(Succeed())
		pod := runningPods(ctx, ns, "gpu8", 1)[0]

		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-max-gpus"}}
		wp.Spec.Rego = maxGPUsPerPod
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Match.Kinds = []string{"Pod"}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 4}`)}
		enforcePolicy(ctx, c, wp)
		// In force: a new 8-GPU Pod is denied.
		Eventually(func() error {
			p := builders.New("Pod", builders.Options{Namespace: ns, Name: "gpu8-again", Annotations: serving("8", nil)})
			return c.Create(ctx, p, client.DryRunAll)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(MatchError(ContainSubstring("asks for 8 GPUs, at most 4")))

		before := modelgateMetric(ctx, Default, "modelgate_validating_reviews_total", map[string]string{"kind": "Pod", "outcome": "ratcheted"})
		warned.Take()
		By("kubectl label pod ... touched=yes, as a controller would")
		cur := &corev1.Pod{}
		Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), cur)).To(Succeed())
		cur.Labels["touched"] = "yes"
		Expect(c.Update(ctx, cur)).To(Succeed())
		Expect(warned.Take()).To(ContainElement("[" + wp.Name + "] existing violation, not introduced by this update: " + pod.Name + " asks for 8 GPUs, at most 4"))
		Expect(modelgateMetric(ctx, Default, "modelgate_validating_reviews_total", map[string]string{"kind": "Pod", "outcome": "ratcheted"})).To(Equal(before + 1))
		Expect(c.Get(ctx, client.ObjectKeyFromObject(&pod), cur)).To(Succeed())
		Expect(cur.Labels).To(HaveKeyWithValue("touched", "yes"))
	}, SpecTimeout(2*time.Minute))
})
