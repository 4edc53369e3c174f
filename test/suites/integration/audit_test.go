package integration_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/audit"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/validators"
)

// apiNamespaces reads namespaces' labels from the API server.
type apiNamespaces struct{ c client.Client }

func (n apiNamespaces) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := n.c.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// auditPolicy denies every Deployment of the namespaces it matches.
const auditPolicy = `package test.audit

deny contains sprintf("Deployment %s is not allowed here", [input.workload.name]) if input.workload.kind == "Deployment"
`

var _ = Describe("audit", Ordered, func() {
	It("reports running workloads against today's policies and injection, as PolicyReports and WorkloadPolicy status, with modelgate's permissions", func(ctx SpecContext) {
		pc, err := client.New(adminCfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		// The runner writes with config/rbac's permissions alone.
		mg, err := client.New(modelgateCfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())

		// A GPU Deployment that does not opt in is admitted untouched; then
		// its namespace opts every workload in: it is opted in, and was
		// never injected.
		ns := namespace(ctx, nil)
		dep := builders.New("Deployment", builders.Options{Namespace: ns, Name: "train"}).(*appsv1.Deployment)
		dep.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		Expect(admin.Create(ctx, dep)).To(Succeed())
		Expect(dep.Spec.Template.Spec.InitContainers).To(BeEmpty())
		labelNamespace(ctx, ns, func(l map[string]string) { l[annotations.NamespaceInjection] = annotations.InjectionEnabled })

		// A policy written after the Deployment, which it denies.
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "audit-" + ns}}
		wp.Spec.Rego = auditPolicy
		wp.Spec.Match.Namespaces = []string{ns}
		Expect(pc.Create(ctx, wp)).To(Succeed())
		// The suite's modelgate enforces it too: out of force before the
		// next spec.
		DeferCleanup(func(ctx context.Context) { deletePolicy(ctx, pc, wp) })
		compiled, err := validators.CompileWorkloadPolicy(ctx, wp)
		Expect(err).NotTo(HaveOccurred())
		engine := policies.NewEngine(policies.Options{})
		engine.Swap(policies.NewSet(compiled))

		cfg := env.Configuration(testEnv)
		runner := &audit.Runner{Client: mg, Reader: mg, Engine: engine, Namespaces: apiNamespaces{admin},
			Config: cfg, Metrics: audit.NewMetrics(nil)}
		auditStatus := func(g Gomega) *policyv1.AuditStatus {
			var got policyv1.WorkloadPolicy
			g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(wp), &got)).To(Succeed())
			g.Expect(got.Status.Audit).NotTo(BeNil())
			return got.Status.Audit
		}

		By("a pass before the PolicyReport CRD is installed writes the policy's counts")
		Expect(runner.Pass(ctx)).To(Succeed())
		st := auditStatus(Default)
		Expect([]int32{st.Fail, st.Warn, st.Error, st.Pass}).To(Equal([]int32{1, 0, 0, 0}))

		By("with the CRD, a pass writes the namespace's PolicyReport")
		root, err := env.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(filepath.Join(root, "config/policyreport/policyreports.yaml"))
		Expect(err).NotTo(HaveOccurred())
		crd := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal(data, &crd.Object)).To(Succeed())
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, crd))).To(Succeed())
		report := func(g Gomega) *unstructured.Unstructured {
			r := &unstructured.Unstructured{}
			r.SetGroupVersionKind(audit.PolicyReportGVK)
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: audit.ReportName}, r)).To(Succeed())
			return r
		}
		Eventually(func() error { return runner.Pass(ctx) }).WithTimeout(30 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			r := report(g)
			g.Expect(r.Object["summary"]).To(Equal(map[string]any{"pass": int64(0), "fail": int64(2), "warn": int64(0), "error": int64(0), "skip": int64(0)}))
			results, _, _ := unstructured.NestedSlice(r.Object, "results")
			g.Expect(results).To(HaveLen(2))
			byPolicy := map[string]map[string]any{}
			for _, res := range results {
				m := res.(map[string]any)
				byPolicy[m["policy"].(string)] = m
				g.Expect(m["resources"]).To(Equal([]any{map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
					"namespace": ns, "name": "train", "uid": string(dep.UID)}}))
				g.Expect(m["source"]).To(Equal("modelgate"))
			}
			g.Expect(byPolicy[wp.Name]).To(HaveKeyWithValue("message", "Deployment train is not allowed here"))
			g.Expect(byPolicy[wp.Name]).To(HaveKeyWithValue("result", "fail"))
			g.Expect(byPolicy[audit.InjectionPolicy]).To(HaveKeyWithValue("rule", "missing"))
			g.Expect(byPolicy[audit.InjectionPolicy]).To(HaveKeyWithValue("severity", "high"))
		}).Should(Succeed())

		By("once the workload is gone, the next pass empties the report and the counts")
		Expect(admin.Delete(ctx, dep)).To(Succeed())
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(dep), &d)).NotTo(Succeed())
		}).Should(Succeed())
		Expect(runner.Pass(ctx)).To(Succeed())
		r := report(Default)
		results, _, _ := unstructured.NestedSlice(r.Object, "results")
		Expect(results).To(BeEmpty())
		Expect(r.Object["summary"]).To(HaveKeyWithValue("fail", int64(0)))
		st = auditStatus(Default)
		Expect([]int32{st.Fail, st.Warn, st.Error, st.Pass}).To(Equal([]int32{0, 0, 0, 0}))
	})
})
