package e2e_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// policiesLoaded is modelgate's count of the policies in force.
func policiesLoaded(ctx context.Context, g Gomega) float64 {
	return modelgateMetric(ctx, g, "modelgate_policies_loaded", nil)
}

// enforcePolicy creates wp as c and returns once modelgate enforces it:
// its status is Ready at its generation, and modelgate counts one policy
// more in force. After the spec it deletes wp and waits until modelgate
// counts it no more, so that the next spec, whichever it is, starts with no
// change of the policies in force still to come (the audit runs a pass
// after each change).
func enforcePolicy(ctx context.Context, c client.Client, wp *policyv1.WorkloadPolicy) {
	GinkgoHelper()
	before := policiesLoaded(ctx, Default)
	Expect(c.Create(ctx, wp)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(c.Delete(ctx, wp))).To(Succeed())
		Eventually(func(g Gomega) float64 { return policiesLoaded(ctx, g) }).WithContext(ctx).WithTimeout(30*time.Second).
			Should(Equal(before), "modelgate still enforces WorkloadPolicy %s", wp.Name)
	}, NodeTimeout(time.Minute))
	Eventually(func(g Gomega) {
		got := &policyv1.WorkloadPolicy{}
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, policyv1.ConditionReady)).To(BeTrue(), "conditions: %+v", got.Status.Conditions)
		g.Expect(policiesLoaded(ctx, g)).To(Equal(before+1), "policies in force")
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}
