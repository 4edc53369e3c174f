package e2e_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/audit"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// exceptionClockSkew is the simulated cluster's policy.exceptions.clockSkew.
const exceptionClockSkew = 5 * time.Second

// Issue 29: an exception's expiry reaches the audit: while it is in force
// the PolicyReport and the OpenReports Report say skip, naming it; once it
// expires the next pass reports the workload's violation, its status says
// Expired, and modelgate audit on the cluster fails it.
var _ = Describe("exceptions", func() {
	It("reports a running workload it covers as skip, then as fail once it expires, in both report kinds", func(ctx SpecContext) {
		c := warningClient(&env.Warnings{})

		ns := newNamespace(ctx, "exception")
		Expect(k8s.Create(ctx, deployment(ns, "llm", 1, serving("1", nil)))).To(Succeed())
		runningPods(ctx, ns, "llm", 1)

		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-no-serving"}}
		wp.Spec.Rego = noServing
		wp.Spec.Match.Namespaces = []string{ns}
		enforcePolicy(ctx, c, wp)

		ex := &policyv1.WorkloadPolicyException{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm-until-friday"},
			Spec: policyv1.WorkloadPolicyExceptionSpec{
				Policies:  []string{wp.Name},
				Match:     policyv1.ExceptionMatch{Kinds: []string{"Deployment"}, Names: []string{"llm"}},
				ExpiresAt: metav1.NewTime(time.Now().Add(40 * time.Second).Truncate(time.Second)),
				Reason:    "serving until the migration",
				Ticket:    "OPS-123",
			},
		}
		Expect(c.Create(ctx, ex)).To(Succeed())
		created := time.Now()
		// Deleted before the policy after the spec (not later, with the
		// namespace): removing it changes what the audit reports, and a
		// pass would follow in the next spec.
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(c.Delete(ctx, ex))).To(Succeed())
			Eventually(func(g Gomega) {
				g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(ex), &policyv1.WorkloadPolicyException{}))).To(BeTrue())
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}, NodeTimeout(time.Minute))

		result := func(g Gomega, gvk schema.GroupVersionKind) map[string]any {
			r := &unstructured.Unstructured{}
			r.SetGroupVersionKind(gvk)
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r)).To(Succeed())
			res, _, _ := unstructured.NestedSlice(r.Object, "results")
			g.Expect(res).To(HaveLen(1))
			return res[0].(map[string]any)
		}
		By("in force: skip, naming the exception, in both kinds of report")
		Eventually(func(g Gomega) {
			for _, gvk := range []schema.GroupVersionKind{audit.PolicyReportGVK, audit.OpenReportGVK} {
				m := result(g, gvk)
				g.Expect(m).To(HaveKeyWithValue("policy", wp.Name))
				g.Expect(m).To(HaveKeyWithValue("result", "skip"))
				g.Expect(m["properties"]).To(HaveKeyWithValue("exception", ns+"/llm-until-friday"))
				g.Expect(m["properties"]).To(HaveKeyWithValue("exceptionTicket", "OPS-123"))
			}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ex), ex)).To(Succeed())
			g.Expect(ex.Status.State).To(Equal(policyv1.ExceptionActive))
		}).WithContext(ctx).WithTimeout(ex.Spec.ExpiresAt.Sub(created) - exceptionClockSkew).WithPolling(time.Second).Should(Succeed())

		By("expired: the next pass fails it, and the status says Expired")
		Eventually(func(g Gomega) {
			for _, gvk := range []schema.GroupVersionKind{audit.PolicyReportGVK, audit.OpenReportGVK} {
				m := result(g, gvk)
				g.Expect(m).To(HaveKeyWithValue("result", "fail"))
				g.Expect(m).To(HaveKeyWithValue("message", "Deployment llm may not serve here"))
			}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ex), ex)).To(Succeed())
			g.Expect(ex.Status.State).To(Equal(policyv1.ExceptionExpired))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("exception expiry to a failing report", time.Since(ex.Spec.ExpiresAt.Time).Round(time.Second).String())

		stdout, stderr, code := auditCLI(ctx, ns)
		Expect(code).To(Equal(1), stderr)
		Expect(stdout).To(Equal(fmt.Sprintf("FAIL  Deployment %s/llm [%s] Deployment llm may not serve here\n"+
			"1 workloads audited: 1 failures, 0 warnings, 0 errors\n", ns, wp.Name)))
	}, SpecTimeout(4*time.Minute))
})
