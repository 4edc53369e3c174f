package integration_test

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// Issue 42, item 5: ResourceClaims and ResourceClaimTemplates are judged
// at their own admission by the GPU policies that name their kinds, so a
// claim deleted and created again asking for more than the Pod that names
// it may hold is refused; and the update that removes such a Pod's
// scheduling gate is judged against the claim as it is then.
var _ = Describe("DRA claims judged themselves", Ordered, func() {
	var (
		ctx context.Context
		ns  string
		wp  *policyv1.WorkloadPolicy
		// c is the cluster admin, with modelgate's policy types.
		c client.Client
	)
	gpus := func(kind, name string, mode resourcev1.DeviceAllocationMode, n int64) client.Object {
		req := resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: mode, Count: n}}
		spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}}
		meta := metav1.ObjectMeta{Namespace: ns, Name: name}
		if kind == "ResourceClaimTemplate" {
			return &resourcev1.ResourceClaimTemplate{ObjectMeta: meta, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: spec}}
		}
		return &resourcev1.ResourceClaim{ObjectMeta: meta, Spec: spec}
	}
	BeforeAll(func() {
		ctx = context.Background()
		ns = namespace(ctx, nil)
		var err error
		c, err = client.New(adminCfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		rego, err := os.ReadFile(filepath.Join("..", "..", "..", "policies", "library", "max-gpus-per-pod.rego"))
		Expect(err).NotTo(HaveOccurred())
		wp = &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "max-gpus-claims"}}
		wp.Spec.Rego = string(rego)
		wp.Spec.EnforcementAction = policyv1.EnforcementActionDeny
		wp.Spec.Match.Kinds = []string{"Pod", "ResourceClaim", "ResourceClaimTemplate"}
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 2}`)}
		applyPolicy(ctx, c, wp)
	})

	It("refuses a claim or template asking for more GPUs than a pod may hold, or every GPU of a node, with the policy's message", func() {
		for _, kind := range []string{"ResourceClaim", "ResourceClaimTemplate"} {
			By(kind)
			err := admin.Create(ctx, gpus(kind, "four", "", 4))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(`denied the request: [max-gpus-claims] ` + kind +
				` "four" asks for 4 GPUs (request "gpu"); at most 2 are allowed per pod in namespace "` + ns + `"`))

			err = admin.Create(ctx, gpus(kind, "whole-node", resourcev1.DeviceAllocationModeAll, 0))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(ContainSubstring(`denied the request: [max-gpus-claims] ` + kind +
				` "whole-node" asks for every GPU of a node (request "gpu": allocationMode All of device class "gpu.nvidia.com"); ask for an exact count, at most 2 per pod`))

			Expect(admin.Create(ctx, gpus(kind, "two", "", 2))).To(Succeed(), "a %s within the limit", kind)
		}
		for _, kind := range []string{"ResourceClaim", "ResourceClaimTemplate"} {
			Expect(metricSum("modelgate_validating_reviews_total", map[string]string{"kind": kind, "outcome": "denied"})).
				To(BeNumerically(">=", 2), "denied %s reviews counted", kind)
		}
	})

	It("refuses the claim a gated Pod names when it is created again asking for more, and the Pod's gate removal once it asks for more", func() {
		Expect(admin.Create(ctx, gpus("ResourceClaim", "accel", "", 2))).To(Succeed())
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "gated"}).(*corev1.Pod)
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptrTo("accel")}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		// The webhook reads the claim from its cache: it may take a moment
		// to see the claim just created.
		Eventually(func() error { return admin.Create(ctx, pod) }).Should(Succeed())

		By("the claim deleted and created again asking for 4")
		deleteClaim := func() {
			GinkgoHelper()
			Expect(admin.Delete(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "accel"}})).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "accel"}, &resourcev1.ResourceClaim{}))
			}).Should(BeTrue())
		}
		deleteClaim()
		err := admin.Create(ctx, gpus("ResourceClaim", "accel", "", 4))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`[max-gpus-claims] ResourceClaim "accel" asks for 4 GPUs (request "gpu"); at most 2 are allowed per pod in namespace "` + ns + `"`))

		By("a claim for 4 that got in while the policy did not enforce")
		wp.Spec.EnforcementAction = policyv1.EnforcementActionDryRun
		updatePolicy(ctx, c, wp)
		Expect(admin.Create(ctx, gpus("ResourceClaim", "accel", "", 4))).To(Succeed())
		wp.Spec.EnforcementAction = policyv1.EnforcementActionDeny
		updatePolicy(ctx, c, wp)

		ungate := func(opts ...client.UpdateOption) error {
			p := &corev1.Pod{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
				return err
			}
			p.Spec.SchedulingGates = nil
			return admin.Update(ctx, p, opts...)
		}
		const asksFor4 = `[max-gpus-claims] pod asks for 4 GPUs (container "server"); at most 2 are allowed per pod in namespace "`
		// Until the webhook's cache holds the new claim, the Pod's claim
		// is not found, which denies too, in other words: wait for these.
		Eventually(func() string {
			if err := ungate(client.DryRunAll); err != nil {
				return err.Error()
			}
			return "admitted"
		}).Should(ContainSubstring(asksFor4 + ns + `"`))
		err = ungate()
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(asksFor4 + ns + `"`))
		Expect(err.Error()).NotTo(ContainSubstring("existing violation"), "the claim created since is not the Pod's own violation")
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		Expect(pod.Spec.SchedulingGates).To(HaveLen(1), "the gate went although the update was denied")

		By("the claim asking for 2 again: the gate goes")
		deleteClaim()
		Expect(admin.Create(ctx, gpus("ResourceClaim", "accel", "", 2))).To(Succeed())
		Eventually(func() error { return ungate() }).Should(Succeed())
	})
})
