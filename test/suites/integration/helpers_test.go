package integration_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// applyPolicy creates the WorkloadPolicy with c, waits until it is in
// force (waitPolicyInForce), and deletes it after the spec, waiting until
// modelgate has dropped it (deletePolicy).
func applyPolicy(ctx context.Context, c client.Client, wp *policyv1.WorkloadPolicy) {
	GinkgoHelper()
	Expect(c.Create(ctx, wp)).To(Succeed())
	DeferCleanup(func(ctx context.Context) { deletePolicy(ctx, c, wp) })
	waitPolicyInForce(ctx, c, wp)
}

// updatePolicy updates the WorkloadPolicy with c and waits until the new
// generation is in force (waitPolicyInForce).
func updatePolicy(ctx context.Context, c client.Client, wp *policyv1.WorkloadPolicy) {
	GinkgoHelper()
	Expect(c.Update(ctx, wp)).To(Succeed())
	waitPolicyInForce(ctx, c, wp)
}

// waitPolicyInForce waits until modelgate has compiled the policy's
// generation (Ready, at that generation: the reconciler writes it once the
// generation is in its engine) and the engine of the suite's webhook holds
// the policy. From then on the next review is judged by it: the specs
// assert denials at once, not eventually.
func waitPolicyInForce(ctx context.Context, c client.Client, wp *policyv1.WorkloadPolicy) {
	GinkgoHelper()
	generation := wp.Generation
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), wp)).To(Succeed())
		g.Expect(wp.Generation).To(Equal(generation))
		g.Expect(meta.IsStatusConditionTrue(wp.Status.Conditions, policyv1.ConditionReady)).To(BeTrue())
		g.Expect(wp.Status.ObservedGeneration).To(Equal(wp.Generation))
		// Any replica may write the status (they all compute the same):
		// the one the API server calls holds the policy once it is in
		// its engine's set.
		g.Expect(served.Engine.Set().Names()).To(ContainElement(wp.Name))
	}).Should(Succeed())
}

// deletePolicy deletes the WorkloadPolicies (gone already is fine) and
// waits until the suite's modelgate has taken them out of force: the
// reconciler drops a policy a moment after its deletion, and until then it
// still judges (and a change of the policy set empties the decision cache).
func deletePolicy(ctx context.Context, c client.Client, wps ...*policyv1.WorkloadPolicy) {
	GinkgoHelper()
	names := make([]string, 0, len(wps))
	for _, wp := range wps {
		Expect(client.IgnoreNotFound(c.Delete(ctx, wp))).To(Succeed())
		names = append(names, wp.Name)
	}
	Eventually(func() []string {
		var left []string
		for _, n := range served.Engine.Set().Names() {
			if slices.Contains(names, n) {
				left = append(left, n)
			}
		}
		return left
	}).WithContext(ctx).Should(BeEmpty(), "deleted WorkloadPolicies still in force")
}

// namespace creates a namespace with the labels and returns its name, once
// modelgate's namespace cache holds it: a review in a namespace the cache
// has not seen waits a moment (injection.namespaceCacheWait) and then fails.
func namespace(ctx context.Context, labels map[string]string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mg-", Labels: labels}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	Eventually(func(g Gomega) {
		got, err := served.Namespaces.NamespaceLabels(ctx, ns.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(ns.Labels))
	}).Should(Succeed(), "namespace %s is not in modelgate's cache", ns.Name)
	return ns.Name
}

// labelNamespace changes the labels of an existing namespace (edit
// changes the map in place) and waits until both readers of namespace
// labels use them: the API server, whose webhook namespaceSelectors and
// admission policies read namespaces from an informer (a dry-run probe the
// suite's namespaceLabelsProbe policy admits only when the namespace it
// sees has exactly these labels), and modelgate's namespace cache.
func labelNamespace(ctx context.Context, name string, edit func(labels map[string]string)) {
	GinkgoHelper()
	ns := &corev1.Namespace{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	edit(ns.Labels)
	Expect(admin.Update(ctx, ns)).To(Succeed())
	want := ns.Labels
	Eventually(func(g Gomega) {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: namespaceLabelsProbe, Annotations: want}}
		g.Expect(admin.Create(ctx, probe, client.DryRunAll)).To(Succeed(), "the API server's namespace informer")
		got, err := served.Namespaces.NamespaceLabels(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), "modelgate's namespace cache")
	}).Should(Succeed())
}

// namespaceLabelsProbe names the suite's ValidatingAdmissionPolicy (and
// its binding) that admits a ConfigMap of this name only when its
// annotations are the labels the API server's namespace informer has for its namespace:
// the webhooks' namespaceSelectors read the same informer.
const namespaceLabelsProbe = "integration-namespace-labels-probe"

// installNamespaceLabelsProbe installs the namespaceLabelsProbe policy
// and waits until the API server enforces it.
func installNamespaceLabelsProbe(ctx context.Context, ns string) {
	GinkgoHelper()
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: namespaceLabelsProbe},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
							Resources: []string{"configmaps"}},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "probe", Expression: "object.metadata.name == '" + namespaceLabelsProbe + "'",
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "has(object.metadata.annotations) && has(namespaceObject.metadata.labels) && " +
					"object.metadata.annotations == namespaceObject.metadata.labels",
				Message: "the namespace's labels as the API server sees them are not the probe's annotations",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespaceLabelsProbe},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        namespaceLabelsProbe,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	Expect(admin.Create(ctx, vap)).To(Succeed())
	Expect(admin.Create(ctx, binding)).To(Succeed())
	// Policies and bindings are loaded through a watch too: enforced once
	// a probe with the wrong labels is refused, and one with the right
	// labels admitted.
	Eventually(func(g Gomega) {
		wrong := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: namespaceLabelsProbe,
			Annotations: map[string]string{"not": "a label"}}}
		g.Expect(admin.Create(ctx, wrong, client.DryRunAll)).To(MatchError(ContainSubstring(namespaceLabelsProbe)))
	}).Should(Succeed())
	nsObj := &corev1.Namespace{}
	Expect(admin.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	right := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: namespaceLabelsProbe, Annotations: nsObj.Labels}}
	Expect(admin.Create(ctx, right, client.DryRunAll)).To(Succeed())
}

// waitAllowed waits until the API server's authorizer lets the user (in
// the groups) do each of attrs: RBAC is read from informers, so a binding
// just created is not in force at once.
func waitAllowed(ctx context.Context, user string, groups []string, attrs ...authorizationv1.ResourceAttributes) {
	GinkgoHelper()
	for _, a := range attrs {
		Eventually(func(g Gomega) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups, ResourceAttributes: a.DeepCopy()}}
			g.Expect(admin.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeTrue(), "%s may not %s %s.%s in %q yet", user, a.Verb, a.Resource, a.Group, a.Namespace)
		}).Should(Succeed())
	}
}

// activeWorkers is how many reconciles of the named controller are running
// now, in every manager of the process.
func activeWorkers(controller string) float64 {
	return metricSum("controller_runtime_active_workers", map[string]string{"controller": controller})
}

// metricSum sums the series of the counter or gauge name in the process's
// registry whose labels include match; 0 when there is none.
func metricSum(name string, match map[string]string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			total += env.SumSeries(f.GetMetric(), match)
		}
	}
	return total
}

// authenticated returns a client for a user who authenticates with a client
// certificate, as a human with kubectl would, in the given groups.
func authenticated(name string, groups ...string) client.Client {
	u, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// impersonating returns a client that acts as the given user (for service
// accounts and controllers, which the admin impersonates).
func impersonating(name string, groups ...string) client.Client {
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// reviewCount is how many mutating reviews modelgate has answered for a
// kind, whatever the outcome: it proves whether the API server called it.
func reviewCount(kind string) float64 { return outcomeCount(kind, "") }

// outcomeCount is how many mutating reviews of a kind ended with the
// outcome ("" for any).
func outcomeCount(kind, outcome string) float64 {
	match := map[string]string{"kind": kind}
	if outcome != "" {
		match["outcome"] = outcome
	}
	return metricSum("modelgate_mutating_reviews_total", match)
}

// reservedKeys returns modelgate's labels and annotations on a metadata, to
// compare or to assert absent.
func reservedKeys(m metav1.Object) map[string]string {
	out := map[string]string{}
	for k, v := range m.GetLabels() {
		if isModelgateKey(k) {
			out["label:"+k] = v
		}
	}
	for k, v := range m.GetAnnotations() {
		if isModelgateKey(k) && k != "modelgate.io/inject" {
			out["annotation:"+k] = v
		}
	}
	return out
}

func isModelgateKey(k string) bool {
	return len(k) > len("modelgate.io/") && k[:len("modelgate.io/")] == "modelgate.io/"
}

var nameCounter int

// uniqueName returns a name not used before in this run, for objects in
// shared namespaces such as kube-system.
func uniqueName(prefix string) string {
	nameCounter++
	return fmt.Sprintf("%s-%d-%d", prefix, GinkgoRandomSeed()%100000, nameCounter)
}

// policyEvaluations is how many times the policy was evaluated with the
// decision.
func policyEvaluations(policy, decision string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != "modelgate_policy_evaluations_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["policy"] == policy && labels["decision"] == decision {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// metricValue is the value of the unlabelled counter or gauge, 0 when it
// has no sample.
func metricValue(name string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name || len(f.GetMetric()) == 0 {
			continue
		}
		m := f.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	return 0
}

// runManager starts mgr in the background. stop ends it; done is closed
// when its Start has returned, which must be without an error.
func runManager(mgr manager.Manager) (stop context.CancelFunc, done <-chan struct{}) {
	ctx, stop := context.WithCancel(context.Background())
	closed := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(closed)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return stop, closed
}

// readyz is the status code and verbose body of a manager's /readyz at
// its health address; 0 and the error when it does not answer.
func readyz(healthAddr string) (int, string) {
	resp, err := http.Get("http://" + healthAddr + "/readyz?verbose") //nolint:noctx // a test probe.
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
