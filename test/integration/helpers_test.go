package integration_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// applyPolicy creates the WorkloadPolicy with c, waits until modelgate has
// compiled it (Ready, at its generation), and deletes it after the spec.
func applyPolicy(ctx context.Context, c client.Client, wp *policyv1.WorkloadPolicy) {
	GinkgoHelper()
	Expect(c.Create(ctx, wp)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(c.Delete(ctx, wp))).To(Succeed()) })
	Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(wp), wp)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(wp.Status.Conditions, policyv1.ConditionReady)).To(BeTrue())
		g.Expect(wp.Status.ObservedGeneration).To(Equal(wp.Generation))
	}).Should(Succeed())
}

// namespace creates a namespace with the labels and returns its name.
func namespace(ctx context.Context, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "mg-", Labels: labels}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
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
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "modelgate_mutating_reviews_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			kindOK, outcomeOK := false, outcome == ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "kind":
					kindOK = l.GetValue() == kind
				case "outcome":
					outcomeOK = outcomeOK || l.GetValue() == outcome
				}
			}
			if kindOK && outcomeOK {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
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
