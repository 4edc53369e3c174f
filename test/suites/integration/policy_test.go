package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// policyScheme knows the built-in kinds and WorkloadPolicy.
func policyScheme() *runtime.Scheme {
	GinkgoHelper()
	s := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	Expect(policyv1.AddToScheme(s)).To(Succeed())
	return s
}

// gpuLimit is a policy that denies more than 1 GPU per pod, on the
// workload view modelgate builds.
const gpuLimit = `package test.gpulimit

deny contains msg if {
	input.workload.gpu.count > input.parameters.max
	msg := sprintf("asks for %d GPUs, at most %d", [input.workload.gpu.count, input.parameters.max])
}
`

var _ = Describe("Rego policies at admission", Ordered, func() {
	var (
		ctx   context.Context
		ns    string
		alice client.Client
		warn  *env.Warnings
	)
	BeforeAll(func() {
		warn = &env.Warnings{}
		u, err := testEnv.AddUser(envtest.User{Name: aliceName, Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		cfg := u.Config()
		cfg.WarningHandlerWithContext = warn
		alice, err = client.New(cfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		ctx = context.Background()
		ns = namespace(ctx, nil)
	})

	// policy builds a WorkloadPolicy scoped to this suite's namespace.
	policy := func(name, rego string, action policyv1.EnforcementAction, params string) *policyv1.WorkloadPolicy {
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		wp.Spec.Rego = rego
		wp.Spec.EnforcementAction = action
		wp.Spec.Match.Namespaces = []string{ns}
		if params != "" {
			wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(params)}
		}
		return wp
	}
	// apply creates the policy and waits until it is Ready, and removes it
	// after the spec.
	apply := func(wp *policyv1.WorkloadPolicy) {
		GinkgoHelper()
		applyPolicy(ctx, alice, wp)
	}
	// gpuDeployment is an opted-in Deployment asking for n GPUs.
	gpuDeployment := func(name string, n int) client.Object {
		a := vllmAnnotations(hfModel)
		a[annotations.GPU] = fmt.Sprint(n)
		return builders.New("Deployment", builders.Options{Namespace: ns, Name: name, TemplateAnnotations: a})
	}
	// denied dry-runs the create of obj, which must be denied, and returns
	// the error. The policies were waited for (applyPolicy, updatePolicy):
	// the first review after is judged by them.
	denied := func(obj client.Object) error {
		GinkgoHelper()
		err := alice.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
		Expect(err).To(HaveOccurred())
		return err
	}

	It("makes a valid WorkloadPolicy Ready, and denies a violating Deployment with [policy] message", func() {
		apply(policy("max-one-gpu", gpuLimit, policyv1.EnforcementActionDeny, `{"max": 1}`))
		err := denied(gpuDeployment("greedy", 2))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("[max-one-gpu] asks for 2 GPUs, at most 1"))
		Expect(alice.Create(ctx, gpuDeployment("modest", 1))).To(Succeed())
	})

	It("rejects an invalid WorkloadPolicy at apply, with the line and column", func() {
		wp := policy("broken", "package test.broken\n\ndeny contains msg if {\n\tmsg := \n}\n", policyv1.EnforcementActionDeny, "")
		err := alice.Create(ctx, wp)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(MatchRegexp(`spec\.rego: Invalid value: .*5:1: rego_parse_error`))

		noRules := policy("no-rules", "package test.norules\n\nallow := true\n", policyv1.EnforcementActionDeny, "")
		err = alice.Create(ctx, noRules)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("deny"))
	})

	// Issue 15, item 4: a Rego bomb does not get in.
	It("refuses a WorkloadPolicy calling a builtin that allocates without bound, with the line and why", func() {
		wp := policy("bomb", "package test.bomb\n\ndeny contains msg if {\n\tsome i in numbers.range(1, 1e9)\n\tmsg := sprintf(\"%d\", [i])\n}\n",
			policyv1.EnforcementActionDeny, "")
		err := alice.Create(ctx, wp)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`4:12: modelgate_builtin_error: numbers.range is not available to admission policies: it allocates an array as long as the range`))
	})

	It("lets a warn policy's violation through, with the warning sent to the client", func() {
		apply(policy("warn-gpus", gpuLimit, policyv1.EnforcementActionWarn, `{"max": 1}`))
		warn.Take()
		Expect(alice.Create(ctx, gpuDeployment("warned", 2), client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).To(ContainElement("[warn-gpus] asks for 2 GPUs, at most 1"))
		Expect(alice.Create(ctx, gpuDeployment("warned", 2))).To(Succeed())
	})

	It("lets a dry-run policy's violation through and counts it", func() {
		wp := policy("dry-gpus", gpuLimit, policyv1.EnforcementActionDryRun, `{"max": 1}`)
		apply(wp)
		before := policyEvaluations("dry-gpus", "dryrun")
		warn.Take()
		Expect(alice.Create(ctx, gpuDeployment("dry", 2), client.DryRunAll)).To(Succeed())
		Expect(policyEvaluations("dry-gpus", "dryrun")).To(Equal(before + 1))
		Expect(warn.Take()).NotTo(ContainElement(ContainSubstring("dry-gpus")))
	})

	It("applies an edited policy without a restart, and forgets a deleted one", func() {
		wp := policy("edited", gpuLimit, policyv1.EnforcementActionDeny, `{"max": 4}`)
		apply(wp)
		obj := gpuDeployment("edit-me", 2)
		Expect(alice.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)).To(Succeed())

		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 1}`)}
		updatePolicy(ctx, alice, wp)
		Expect(denied(obj).Error()).To(ContainSubstring("[edited] asks for 2 GPUs, at most 1"))

		deletePolicy(ctx, alice, wp)
		Expect(alice.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)).To(Succeed())
	})

	It("follows the failurePolicy when a policy's evaluation fails", func() {
		// Two values for one complete rule are an evaluation error.
		const failing = `package test.failing

x := 1 if input.workload.kind == "Deployment"

x := 2 if input.workload.name != ""

deny contains "never" if x == 3
`
		strict := policy("fails-closed", failing, policyv1.EnforcementActionDeny, "")
		strict.Spec.FailurePolicy = policyv1.FailurePolicyDeny
		apply(strict)
		err := alice.Create(ctx, gpuDeployment("fail", 1), client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("[fails-closed] policy evaluation failed")))
		deletePolicy(ctx, alice, strict)

		lenient := policy("fails-open", failing, policyv1.EnforcementActionDeny, "")
		lenient.Spec.FailurePolicy = policyv1.FailurePolicyAllow
		apply(lenient)
		warn.Take()
		Expect(alice.Create(ctx, gpuDeployment("fail", 1), client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).To(ContainElement(ContainSubstring("[fails-open] policy evaluation failed")))
	})

	It("sees the injected spec: a policy on the loader image fires", func() {
		const loaderImage = `package test.loader

deny contains msg if {
	some c in input.workload.initContainers
	c.name == "model-loader"
	not startswith(c.image, "registry.internal/")
	msg := sprintf("init container %q uses image %q from outside registry.internal", [c.name, c.image])
}
`
		apply(policy("internal-loader", loaderImage, policyv1.EnforcementActionDeny, ""))
		err := denied(gpuDeployment("loaded", 1))
		Expect(err.Error()).To(ContainSubstring(`[internal-loader] init container "model-loader" uses image "ghcr.io/modelgate/modelgate:latest"`))
	})
	// Issue 29, item 1: updates are judged by what they introduce.
	It("ratchets updates: an HPA's scale of a Deployment a tighter policy denies passes with a warning, raising its GPUs does not, and ratchet: false judges it as new", func() {
		d := gpuDeployment("ratcheted", 2).(*appsv1.Deployment)
		Expect(alice.Create(ctx, d)).To(Succeed())
		wp := policy("max-one-gpu-ratchet", gpuLimit, policyv1.EnforcementActionDeny, `{"max": 1}`)
		apply(wp)
		denied(gpuDeployment("ratcheted-new", 2))

		By("the replicas changed: allowed, the kept violation a warning")
		warn.Take()
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Spec.Replicas = ptr.To[int32](3)
		Expect(alice.Update(ctx, d)).To(Succeed())
		Expect(warn.Take()).To(ContainElement("[max-one-gpu-ratchet] existing violation, not introduced by this update: asks for 2 GPUs, at most 1"))

		By("more GPUs: a violation the update introduces, denied")
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Spec.Template.Annotations[annotations.GPU] = "4"
		err := alice.Update(ctx, d.DeepCopy())
		Expect(err).To(MatchError(ContainSubstring("[max-one-gpu-ratchet] asks for 4 GPUs, at most 1")))
		Expect(err.Error()).NotTo(ContainSubstring("existing violation"))

		By("ratchet: false: the replicas change is judged as if the Deployment were new")
		Expect(alice.Get(ctx, client.ObjectKey{Name: wp.Name}, wp)).To(Succeed())
		wp.Spec.Ratchet = ptr.To(false)
		updatePolicy(ctx, alice, wp)
		cur := &appsv1.Deployment{}
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(d), cur)).To(Succeed())
		cur.Spec.Replicas = ptr.To[int32](1)
		Expect(alice.Update(ctx, cur, client.DryRunAll)).To(MatchError(ContainSubstring("[max-one-gpu-ratchet] asks for 2 GPUs, at most 1")))
		deletePolicy(ctx, alice, wp)
	})
	// Issue 15, item 5: a policy tightened after a GPU Pod was admitted
	// does not keep the Pod from being cleaned up.
	It("lets a GPU Pod admitted before a tighter policy lose its finalizer and be deleted", func() {
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "finished", Annotations: map[string]string{
			annotations.Inject: "true", annotations.GPU: "2",
		}}).(*corev1.Pod)
		pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
		Expect(alice.Create(ctx, pod)).To(Succeed())
		apply(policy("max-one-gpu-later", gpuLimit, policyv1.EnforcementActionDeny, `{"max": 1}`))
		// The policy is in force: a label change is judged, and kept
		// violation comes back as a warning (ratcheting: it does not deny).
		warn.Take()
		p := pod.DeepCopy()
		p.Labels["stage"] = "done"
		Expect(alice.Update(ctx, p, client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).To(ContainElement(HavePrefix("[max-one-gpu-later] existing violation, not introduced by this update: ")))

		Expect(alice.Delete(ctx, pod)).To(Succeed())
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.DeletionTimestamp).NotTo(BeNil())
		pod.Finalizers = nil
		Expect(alice.Update(ctx, pod)).To(Succeed(), "the finalizer's removal was judged")
		Eventually(func() bool {
			return apierrors.IsNotFound(alice.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}).Should(BeTrue())
	})

	// Issue 15, item 6: paths that never reached policy.
	It("denies a privileged kubectl debug container on a GPU Pod", func() {
		rego, err := os.ReadFile(filepath.Join("..", "..", "..", "policies", "library", "no-privileged-gpu.rego"))
		Expect(err).NotTo(HaveOccurred())
		apply(policy("no-privileged-gpu", string(rego), policyv1.EnforcementActionDeny, ""))
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "debugged", Annotations: map[string]string{
			annotations.Inject: "true", annotations.GPU: "1",
		}}).(*corev1.Pod)
		Expect(alice.Create(ctx, pod)).To(Succeed())

		// What kubectl debug --profile=sysadmin sends: the ephemeralcontainers
		// subresource, with a privileged container.
		debug := func(privileged bool, name string) error {
			p := pod.DeepCopy()
			p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox",
					SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(privileged)}}})
			return alice.SubResource("ephemeralcontainers").Update(ctx, p)
		}
		Expect(debug(true, "sysadmin")).To(MatchError(ContainSubstring(
			`[no-privileged-gpu] ephemeral container "sysadmin" sets securityContext.privileged: true in pod, which has GPUs`)))
		Expect(debug(false, "general")).To(Succeed())
	})

	It("judges Pods that ask for GPUs by MIG instance or resource claim, not only nvidia.com/gpu", func() {
		apply(policy("max-one-gpu-mig", gpuLimit, policyv1.EnforcementActionDeny, `{"max": 1}`))
		mig := builders.New("Pod", builders.Options{Namespace: ns, Name: "mig"}).(*corev1.Pod)
		mig.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("2")}
		err := denied(mig)
		Expect(err.Error()).To(ContainSubstring("[max-one-gpu-mig]"))

		apply(policy("no-claims", `package test.noclaims

deny contains msg if {
	some c in input.workload.containers
	count(c.claims) > 0
	msg := sprintf("container %q uses resource claims %v of %v", [c.name, c.claims, input.workload.gpu.claims])
}
`, policyv1.EnforcementActionDeny, ""))
		dra := builders.New("Pod", builders.Options{Namespace: ns, Name: "dra"}).(*corev1.Pod)
		dra.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu-claim")}}
		dra.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		err = denied(dra)
		Expect(err.Error()).To(ContainSubstring(`[no-claims] container "` + dra.Spec.Containers[0].Name + `" uses resource claims ["gpu"] of ["gpu"]`))
	})

	// Issue 32: the Pods of a Deployment are judged once; the others are
	// answered from the decision cache though each has its own name, and a
	// change of what the policies read (the namespace's labels) is seen by
	// the next review, with the denial naming the Pod it denies.
	It("answers repeated reviews from the decision cache and sees a namespace label change at the next review", func() {
		frozen := `package test.frozen

deny contains sprintf("namespace is frozen: pod %s waits", [input.workload.name]) if {
	input.workload.namespaceLabels.frozen == "true"
}
`
		wp := policy("frozen", frozen, policyv1.EnforcementActionDeny, "")
		wp.Spec.Match.Kinds = []string{"Pod"}
		apply(wp)
		// A Pod asking for a GPU: what the validating webhook is sent.
		pod := func(name string) client.Object {
			p := builders.New("Pod", builders.Options{Namespace: ns, Name: name}).(*corev1.Pod)
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
			return p
		}
		Expect(alice.Create(ctx, pod("replica-0"), client.DryRunAll)).To(Succeed())
		hits := metricValue("modelgate_policy_decision_cache_hits_total")
		recalled := metricValue("modelgate_policy_decision_cache_recalled_total")
		for i := 1; i <= 5; i++ {
			Expect(alice.Create(ctx, pod(fmt.Sprintf("replica-%d", i)), client.DryRunAll)).To(Succeed())
		}
		Expect(metricValue("modelgate_policy_decision_cache_hits_total")).To(BeNumerically(">=", hits+5),
			"the 5 Pods after the first were not answered from the decision cache (misses %v, entries %v)",
			metricValue("modelgate_policy_decision_cache_misses_total"), metricValue("modelgate_policy_decision_cache_entries"))
		// Each with its own name, uid and service account token volume
		// (the API server's admission adds them), they are answered from
		// their bytes, before decoding.
		Expect(metricValue("modelgate_policy_decision_cache_recalled_total")).To(BeNumerically(">=", recalled+5),
			"the 5 Pods after the first were answered from their views, not their bytes")
		Expect(metricValue("modelgate_policy_decision_cache_entries")).To(BeNumerically(">", 0))
		Expect(metricValue("modelgate_policy_decision_cache_max_bytes")).To(BeNumerically("==", 32<<20))

		// Once modelgate's cache has the label, the very next review sees
		// it: no decision cached before the change answers it.
		labelNamespace(ctx, ns, func(l map[string]string) { l["frozen"] = "true" })
		err := alice.Create(ctx, pod("replica-6"), client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("[frozen] namespace is frozen: pod replica-6 waits")))
		err = alice.Create(ctx, pod("replica-7"), client.DryRunAll)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("pod replica-7 waits"))
		Expect(err.Error()).NotTo(ContainSubstring("replica-6"))

		labelNamespace(ctx, ns, func(l map[string]string) { delete(l, "frozen") })
		Expect(alice.Create(ctx, pod("replica-8"), client.DryRunAll)).To(Succeed())
	})
})
