package integration_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/controller/celpolicy"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// The CEL form of a WorkloadPolicy, made a ValidatingAdmissionPolicy and
// binding by the celpolicy controller (as modelgate's service account, with
// config/rbac's permissions alone) and enforced by the API server itself:
// the suite's own modelgate allows everything this policy's Rego says, so a
// refusal can only come from the API server's CEL.
var _ = Describe("a WorkloadPolicy's CEL form", Ordered, func() {
	var (
		ctx  context.Context
		c    client.Client
		stop context.CancelFunc
		done <-chan struct{}
		ns   string
		wp   *policyv1.WorkloadPolicy
	)
	namedGPUPod := func(name string, gpus int64) *corev1.Pod {
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: name}).(*corev1.Pod)
		pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		return pod
	}
	gpuPod := func(gpus int64) *corev1.Pod { return namedGPUPod("cel-gpus", gpus) }
	generated := func() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
		vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		if err := c.Get(ctx, client.ObjectKey{Name: celform.Name(wp.Name)}, vap); err != nil {
			return nil, nil, err
		}
		if err := c.Get(ctx, client.ObjectKey{Name: celform.Name(wp.Name)}, binding); err != nil {
			return vap, nil, err
		}
		return vap, binding, nil
	}
	BeforeAll(func() {
		ctx = context.Background()
		ns = namespace(ctx, nil)
		s, err := env.Scheme()
		Expect(err).NotTo(HaveOccurred())
		c, err = client.New(adminCfg, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
		mgr, err := ctrl.NewManager(modelgateCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
		Expect(err).NotTo(HaveOccurred())
		rec := &celpolicy.Reconciler{
			Client:  mgr.GetClient(),
			Keys:    celform.Keys{GPUResource: "nvidia.com/gpu", ProductLabel: "nvidia.com/gpu.product"},
			Scope:   celform.Scope{ExcludedNamespaces: []string{"kube-system", env.Namespace}},
			Enforce: true,
		}
		Expect(rec.SetupWithManager(mgr)).To(Succeed())
		stop, done = runManager(mgr)
		wp = &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cel-max-gpus-" + ns}}
		wp.Spec.Rego = "package celmax\n\ndeny contains msg if {\n\tfalse\n\tmsg := \"never\"\n}\n"
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 1}`)}
		wp.Spec.CEL = &policyv1.CELForm{Validations: []policyv1.CELValidation{{
			Expression:        "variables.gpus <= variables.parameters.max",
			MessageExpression: "'asks for ' + string(variables.gpus) + ' GPUs, more than ' + string(variables.parameters.max)",
		}}}
		Expect(c.Create(ctx, wp)).To(Succeed())
	})
	AfterAll(func() {
		_ = c.Delete(ctx, wp)
		stop()
		Eventually(done).Should(BeClosed())
	})

	It("is applied as a ValidatingAdmissionPolicy and binding owned by the WorkloadPolicy, and its state reported", func() {
		Eventually(func(g Gomega) {
			vap, binding, err := generated()
			g.Expect(err).NotTo(HaveOccurred())
			for _, m := range []metav1.ObjectMeta{vap.ObjectMeta, binding.ObjectMeta} {
				g.Expect(m.OwnerReferences).To(HaveLen(1))
				g.Expect(m.OwnerReferences[0].UID).To(Equal(wp.UID))
			}
			g.Expect(binding.Spec.ValidationActions).To(Equal([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}))
		}).Should(Succeed())
		// The API server accepted both; whether its type checking has run
		// depends on the controller manager, which this suite may not run:
		// the condition is there, of this generation, and not False.
		Eventually(func(g Gomega) {
			got := &policyv1.WorkloadPolicy{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), got)).To(Succeed())
			cond := meta.FindStatusCondition(got.Status.Conditions, celpolicy.ConditionCELReady)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(cond.Status).NotTo(Equal(metav1.ConditionFalse), cond.Message)
		}).Should(Succeed())
	})

	It("is enforced by the API server: a Pod over the limit is refused with the policy's message, one within is admitted", func() {
		Eventually(func(g Gomega) {
			err := c.Create(ctx, gpuPod(2), client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy '" + celform.Name(wp.Name) + "'"))
			g.Expect(err.Error()).To(ContainSubstring("[" + wp.Name + "] asks for 2 GPUs, more than 1"))
		}).Should(Succeed())
		Expect(c.Create(ctx, gpuPod(1), client.DryRunAll)).To(Succeed())
	})

	// The generated policy holds the WorkloadPolicyExceptions in force that
	// name the WorkloadPolicy, and ratchets updates as modelgate does.
	Context("with a WorkloadPolicyException", Ordered, func() {
		var (
			ex  *policyv1.WorkloadPolicyException
			dep *appsv1.Deployment
		)
		const excepted = "cel-excepted"
		refusedFor := func(gpus int) string {
			return fmt.Sprintf("[%s] asks for %d GPUs, more than 1", wp.Name, gpus)
		}
		setGPUs := func(d *appsv1.Deployment, gpus int64) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		AfterAll(func() {
			if ex != nil {
				Expect(client.IgnoreNotFound(c.Delete(ctx, ex))).To(Succeed())
			}
			if dep != nil {
				Expect(client.IgnoreNotFound(c.Delete(ctx, dep))).To(Succeed())
			}
		})

		It("lifts the API server's denial for the workload it names, and no other", func() {
			// The suite's modelgate accepts an exception naming a policy
			// in force.
			waitPolicyInForce(ctx, c, wp)
			ex = &policyv1.WorkloadPolicyException{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cel-bench"},
				Spec: policyv1.WorkloadPolicyExceptionSpec{
					Policies:  []string{wp.Name},
					Match:     policyv1.ExceptionMatch{Kinds: []string{"Pod", "Deployment"}, Names: []string{excepted}},
					ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second)),
					Reason:    "a benchmark on 2 GPUs",
				},
			}
			Expect(c.Create(ctx, ex)).To(Succeed())
			Eventually(func() error { return c.Create(ctx, namedGPUPod(excepted, 2), client.DryRunAll) }).Should(Succeed())
			err := c.Create(ctx, gpuPod(2), client.DryRunAll)
			Expect(err).To(MatchError(ContainSubstring(refusedFor(2))), "a Pod the exception does not name")
			Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy '" + celform.Name(wp.Name) + "'"))

			// The API server's type checking (which the controller manager
			// runs, and this suite does not) finds nothing in the policy as
			// generated with the exception, on the kinds' schemas.
			vap, _, err := generated()
			Expect(err).NotTo(HaveOccurred())
			Expect(vap.Spec.Variables).To(ContainElement(HaveField("Name", celform.VarExcepted)))
			dc, err := discovery.NewDiscoveryClientForConfig(adminCfg)
			Expect(err).NotTo(HaveOccurred())
			hc, err := rest.HTTPClientFor(adminCfg)
			Expect(err).NotTo(HaveOccurred())
			mapper, err := apiutil.NewDynamicRESTMapper(adminCfg, hc)
			Expect(err).NotTo(HaveOccurred())
			tc := &validating.TypeChecker{SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc}, RestMapper: mapper}
			Expect(tc.Check(vap)).To(BeEmpty())

			// A Deployment the exception names, created over the limit.
			dep = builders.New("Deployment", builders.Options{Namespace: ns, Name: excepted}).(*appsv1.Deployment)
			setGPUs(dep, 2)
			Expect(c.Create(ctx, dep)).To(Succeed())
		})

		It("denies again once the exception is deleted", func() {
			Expect(c.Delete(ctx, ex)).To(Succeed())
			Eventually(func(g Gomega) {
				err := c.Create(ctx, namedGPUPod(excepted, 2), client.DryRunAll)
				g.Expect(err).To(MatchError(ContainSubstring(refusedFor(2))))
			}).Should(Succeed())
		})

		It("ratchets an update as modelgate does: the Deployment that already asks for too many GPUs scales, and cannot ask for more", func() {
			Expect(c.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
			dep.Spec.Replicas = ptr.To[int32](3)
			Expect(c.Update(ctx, dep, client.DryRunAll)).To(Succeed(), "an update keeping the old violation")
			setGPUs(dep, 3)
			Expect(c.Update(ctx, dep, client.DryRunAll)).To(MatchError(ContainSubstring(refusedFor(3))), "an update making it worse")
		})
	})

	It("goes when the CEL form goes, and the condition with it", func() {
		Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), wp)).To(Succeed())
		wp.Spec.CEL = nil
		Expect(c.Update(ctx, wp)).To(Succeed())
		Eventually(func(g Gomega) {
			_, _, err := generated()
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
			vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: celform.Name(wp.Name)}, vap))).To(BeTrue())
			got := &policyv1.WorkloadPolicy{}
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), got)).To(Succeed())
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, celpolicy.ConditionCELReady)).To(BeNil())
		}).Should(Succeed())
		// The API server drops the policy from force once it is deleted.
		Eventually(func() error { return c.Create(ctx, gpuPod(2), client.DryRunAll) }).Should(Succeed())
	})
})
