package integration_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// bob writes exceptions in the exception specs.
const bobName = "bob@example.com"

var bobGroups = []string{"system:authenticated"}

// Issue 29, item 2: WorkloadPolicyExceptions, with modelgate running as
// its own service account under config/rbac.
var _ = Describe("WorkloadPolicyExceptions", Ordered, func() {
	var (
		ctx context.Context
		ns  string
		bob client.Client // edit in ns, then modelgate-exception-author too
		// padmin is a cluster admin that knows modelgate's kinds.
		padmin client.Client
		warn   *env.Warnings
	)
	BeforeAll(func() {
		ctx = context.Background()
		ns = namespace(ctx, nil)
		var err error
		padmin, err = client.New(adminCfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		warn = &env.Warnings{}
		u, err := testEnv.AddUser(envtest.User{Name: bobName, Groups: bobGroups}, nil)
		Expect(err).NotTo(HaveOccurred())
		cfg := u.Config()
		cfg.WarningHandlerWithContext = warn
		bob, err = client.New(cfg, client.Options{Scheme: policyScheme()})
		Expect(err).NotTo(HaveOccurred())
		// What edit holds: envtest runs no controller-manager to aggregate
		// it, so bob gets the roles it aggregates (and view's, which
		// aggregates modelgate-exception-viewer).
		for _, role := range []string{"system:aggregate-to-edit", "system:aggregate-to-view", "modelgate-exception-viewer"} {
			Expect(admin.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob-" + strings.ReplaceAll(role, ":", "-")},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: bobName}},
			})).To(Succeed())
		}
		// RBAC is read from informers: wait until bob holds what each
		// binding gives him.
		waitAllowed(ctx, bobName, bobGroups,
			authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "apps", Resource: "deployments"},
			authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Group: "apps", Resource: "deployments"},
			authorizationv1.ResourceAttributes{Namespace: ns, Verb: "list", Group: policyv1.GroupVersion.Group, Resource: "workloadpolicyexceptions"})
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "max-one-gpu-ex"}}
		wp.Spec.Rego, wp.Spec.EnforcementAction = gpuLimit, policyv1.EnforcementActionDeny
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 1}`)}
		applyPolicy(ctx, padmin, wp)
	})

	exception := func(name string, expires time.Duration, f func(*policyv1.WorkloadPolicyException)) *policyv1.WorkloadPolicyException {
		ex := &policyv1.WorkloadPolicyException{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1.WorkloadPolicyExceptionSpec{
				Policies:  []string{"max-one-gpu-ex"},
				Match:     policyv1.ExceptionMatch{Kinds: []string{"Deployment", "Pod"}, Names: []string{"bench"}},
				ExpiresAt: metav1.NewTime(time.Now().Add(expires).Truncate(time.Second)),
				Reason:    "benchmark run on 2 GPUs",
				Ticket:    "OPS-123",
			},
		}
		if f != nil {
			f(ex)
		}
		return ex
	}
	gpuDeployment := func(name string) client.Object {
		a := vllmAnnotations(hfModel)
		a[annotations.GPU] = "2"
		return builders.New("Deployment", builders.Options{Namespace: ns, Name: name, TemplateAnnotations: a})
	}

	It("is a permission of its own: edit cannot create one, modelgate-exception-author can", func() {
		Expect(bob.Create(ctx, gpuDeployment("modest"), client.DryRunAll)).
			To(MatchError(ContainSubstring("asks for 2 GPUs")), "bob may create Deployments, which the policy judges")
		Expect(bob.List(ctx, &policyv1.WorkloadPolicyExceptionList{}, client.InNamespace(ns))).To(Succeed(), "view reads exceptions")
		err := bob.Create(ctx, exception("bench", time.Hour, nil))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "edit created an exception: %v", err)

		Expect(admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob-exceptions"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "modelgate-exception-author"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: bobName}},
		})).To(Succeed())
		waitAllowed(ctx, bobName, bobGroups,
			authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: policyv1.GroupVersion.Group, Resource: "workloadpolicyexceptions"})
		Expect(bob.Create(ctx, exception("bench", time.Hour, nil), client.DryRunAll)).To(Succeed())
	})

	It("is rejected at apply when it names a missing policy, has no reason, or expires too soon to ever apply or too far ahead, naming the field", func() {
		for what, c := range map[string]struct {
			ex   *policyv1.WorkloadPolicyException
			want string
		}{
			"missing policy": {exception("bad", time.Hour, func(e *policyv1.WorkloadPolicyException) {
				e.Spec.Policies = []string{"max-one-gpu-ex", "no-such-policy"}
			}), `spec.policies[1]: Not found: "no-such-policy"`},
			"blank reason": {exception("bad", time.Hour, func(e *policyv1.WorkloadPolicyException) { e.Spec.Reason = " " }),
				"spec.reason: Required value"},
			"past": {exception("bad", -time.Minute, nil),
				"must be more than 1s (policy.exceptions.clockSkew) in the future"},
			// Issue 42, item 6: it would stop applying clockSkew (the
			// suite's 1s) before expiresAt, so never apply at all.
			"within the clock skew": {exception("bad", 900*time.Millisecond, nil),
				"spec.expiresAt: Invalid value: %q: must be more than 1s (policy.exceptions.clockSkew) in the future"},
			"too far ahead": {exception("bad", 91*24*time.Hour, nil),
				"must be at most 90 days ahead (policy.exceptions.maxDuration)"},
		} {
			err := bob.Create(ctx, c.ex, client.DryRunAll)
			Expect(err).To(HaveOccurred(), what)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", what, err)
			want := c.want
			if strings.Contains(want, "%q") {
				want = fmt.Sprintf(want, c.ex.Spec.ExpiresAt.UTC().Format(time.RFC3339))
			}
			Expect(err.Error()).To(ContainSubstring(want), what)
		}
	})

	It("warns about a match that selects nothing the policy judges", func() {
		warn.Take()
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "other-namespace-only"}}
		wp.Spec.Rego, wp.Spec.Match.Namespaces = gpuLimit, []string{"somewhere-else"}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 1}`)}
		applyPolicy(ctx, padmin, wp)
		Expect(bob.Create(ctx, exception("nothing", time.Hour, func(e *policyv1.WorkloadPolicyException) {
			e.Spec.Policies = []string{"other-namespace-only"}
		}), client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).To(ContainElement(ContainSubstring(
			fmt.Sprintf("WorkloadPolicy other-namespace-only does not apply in namespace %s", ns))))
	})

	It("turns the denial of what it matches into a warning naming it, its ticket and expiry, until it expires", func() {
		Expect(admin.Create(ctx, gpuDeployment("bench"), client.DryRunAll)).To(MatchError(ContainSubstring("[max-one-gpu-ex] asks for 2 GPUs, at most 1")))
		ex := exception("bench", time.Hour, nil)
		Expect(bob.Create(ctx, ex)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(padmin.Delete(ctx, ex))).To(Succeed()) })
		want := fmt.Sprintf("[max-one-gpu-ex] allowed by exception %s/bench (ticket OPS-123) until %s: asks for 2 GPUs, at most 1",
			ns, ex.Spec.ExpiresAt.UTC().Format(time.RFC3339))
		// The reconciler puts a generation in force, then writes the
		// status for it: from then on the next review applies it.
		inForce := func(state policyv1.ExceptionState) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				g.Expect(bob.Get(ctx, client.ObjectKeyFromObject(ex), ex)).To(Succeed())
				g.Expect(ex.Status.ObservedGeneration).To(Equal(ex.Generation))
				g.Expect(ex.Status.State).To(Equal(state))
			}).Should(Succeed())
		}
		inForce(policyv1.ExceptionActive)
		warn.Take()
		Expect(bob.Create(ctx, gpuDeployment("bench"), client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).To(ContainElement(want))

		By("another Deployment of the namespace: still denied")
		Expect(bob.Create(ctx, gpuDeployment("other"), client.DryRunAll)).To(MatchError(ContainSubstring("[max-one-gpu-ex] asks for 2 GPUs, at most 1")))

		By("at expiresAt (less the skew allowed): denied again, and the status says Expired")
		// Moved to expire in a few seconds (the suite allows 1s of clock
		// skew), once that generation is in force: however slow the
		// machine, the exception is seen before it expires.
		ex.Spec.ExpiresAt = metav1.NewTime(time.Now().Add(5 * time.Second).Truncate(time.Second))
		Expect(bob.Update(ctx, ex)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(bob.Get(ctx, client.ObjectKeyFromObject(ex), ex)).To(Succeed())
			g.Expect(ex.Status.ObservedGeneration).To(Equal(ex.Generation))
		}).Should(Succeed())
		Eventually(func() error {
			return bob.Create(ctx, gpuDeployment("bench"), client.DryRunAll)
		}).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(MatchError(ContainSubstring("[max-one-gpu-ex] asks for 2 GPUs, at most 1")))
		Expect(time.Now().Add(time.Second)).To(BeTemporally(">=", ex.Spec.ExpiresAt.Time), "denied before the exception expired")
		Eventually(func(g Gomega) {
			g.Expect(bob.Get(ctx, client.ObjectKeyFromObject(ex), ex)).To(Succeed())
			g.Expect(ex.Status.State).To(Equal(policyv1.ExceptionExpired))
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})
})
