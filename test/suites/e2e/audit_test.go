package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/audit"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// noServing denies Deployments named "llm": written after one runs.
const noServing = `package e2e.audit

deny contains sprintf("Deployment %s may not serve here", [input.workload.name]) if {
	input.workload.kind == "Deployment"
	input.workload.name == "llm"
}
`

// auditCLI runs the modelgate binary's audit of the namespace on the
// cluster, as its developer, with modelgate's Configuration.
func auditCLI(ctx context.Context, ns string) (stdout, stderr string, code int) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, modelgatePath, "audit", "--kubeconfig", gpuCluster.Kubeconfig,
		"--config", gpuCluster.Configuration, "--namespace", ns)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		Fail(fmt.Sprintf("modelgate audit: %v\n%s", err, errOut.String()))
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

var _ = Describe("audit", func() {
	It("reports a running workload that a policy written after it denies, within seconds of the change, and forgets it when the policy goes", func(ctx SpecContext) {
		c := warningClient(&env.Warnings{})

		ns := newNamespace(ctx, "audit")
		d := deployment(ns, "llm", 1, serving("1", nil))
		Expect(k8s.Create(ctx, d)).To(Succeed())
		runningPods(ctx, ns, "llm", 1)

		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-no-serving"}}
		wp.Spec.Rego = noServing
		wp.Spec.Match.Namespaces = []string{ns}
		enforcePolicy(ctx, c, wp)

		results := func(g Gomega) []any {
			r := &unstructured.Unstructured{}
			r.SetGroupVersionKind(audit.PolicyReportGVK)
			g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r)).To(Succeed())
			res, _, _ := unstructured.NestedSlice(r.Object, "results")
			return res
		}
		// The audit runs again shortly after a policy change, not at its
		// 10 minute interval.
		start := time.Now()
		Eventually(func(g Gomega) {
			res := results(g)
			g.Expect(res).To(HaveLen(1), "the injection is today's: the policy's is the only finding")
			m := res[0].(map[string]any)
			g.Expect(m).To(HaveKeyWithValue("policy", wp.Name))
			g.Expect(m).To(HaveKeyWithValue("result", "fail"))
			g.Expect(m).To(HaveKeyWithValue("message", "Deployment llm may not serve here"))
			g.Expect(m["resources"]).To(ConsistOf(HaveKeyWithValue("name", "llm")))
			var got policyv1.WorkloadPolicy
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), &got)).To(Succeed())
			g.Expect(got.Status.Audit).NotTo(BeNil())
			g.Expect(got.Status.Audit.Fail).To(Equal(int32(1)))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("policy created to PolicyReport", time.Since(start).Round(time.Second).String())

		// modelgate audit, the binary, on the cluster says the same: it
		// reads the cluster's policies and record key as its developer,
		// with modelgate's Configuration.
		stdout, stderr, code := auditCLI(ctx, ns)
		Expect(code).To(Equal(1), stderr)
		Expect(stderr).To(BeEmpty(), "the record key is read and verifies the injection")
		Expect(stdout).To(Equal(fmt.Sprintf("FAIL  Deployment %s/llm [%s] Deployment llm may not serve here\n"+
			"1 workloads audited: 1 failures, 0 warnings, 0 errors\n", ns, wp.Name)))

		// Its own writes (the report, the policy's status) change no policy:
		// no pass runs until the next change or the interval. The pass that
		// wrote the report is counted a moment after its writes: once the
		// last pass's time is the report's.
		var stamp int64
		Eventually(func(g Gomega) {
			res := results(g)
			g.Expect(res).To(HaveLen(1))
			var found bool
			stamp, found, _ = unstructured.NestedInt64(res[0].(map[string]any), "timestamp", "seconds")
			g.Expect(found).To(BeTrue(), "the result's timestamp")
			g.Expect(modelgateMetric(ctx, g, "modelgate_audit_last_pass_timestamp_seconds", nil)).To(BeNumerically(">=", stamp))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(modelgateMetric(ctx, Default, "modelgate_audit_passes_total", map[string]string{"outcome": "ok"})).To(BeNumerically(">=", 1))
		passes := modelgateMetric(ctx, Default, "modelgate_audit_passes_total", nil)
		Consistently(func(g Gomega) float64 {
			return modelgateMetric(ctx, g, "modelgate_audit_passes_total", nil)
		}).WithContext(ctx).WithTimeout(2 * audit.DefaultAfterChange).WithPolling(time.Second).Should(Equal(passes))

		Expect(c.Delete(ctx, wp)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(results(g)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
	})
})
