package prometheus_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// The waits here make each step start only once what it depends on acts:
// the API server's authorizer and admission read RBAC and admission
// policies from informers, a moment after they are written, and a rate
// sees a counter's increment only from a sample Prometheus scraped before
// it.

// waitQuery waits until Prometheus's answer to expr satisfies ok.
func waitQuery(ctx context.Context, t *testing.T, s *prometheus.Server, expr string, timeout time.Duration, ok func([]prometheus.Series) bool) {
	t.Helper()
	var last []prometheus.Series
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := s.Query(ctx, expr)
		if err != nil {
			return false, err
		}
		last = got
		return ok(got), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last answer: %v", expr, err, last)
	}
}

// waitSeries waits until expr returns series.
func waitSeries(ctx context.Context, t *testing.T, s *prometheus.Server, expr string, timeout time.Duration) {
	t.Helper()
	waitQuery(ctx, t, s, expr, timeout, func(got []prometheus.Series) bool { return len(got) > 0 })
}

// waitScraped waits until Prometheus has scraped the targets sel
// selects successfully since since: what they served then is in its
// samples. A scrape's timestamp is never after its start (Prometheus
// aligns it to its schedule only backwards, and stores milliseconds).
func waitScraped(ctx context.Context, t *testing.T, s *prometheus.Server, sel string, since time.Time) {
	t.Helper()
	up := "up{" + sel + "}"
	waitSeries(ctx, t, s, fmt.Sprintf(`(timestamp(%s) > %s) and (%s == 1)`, up, strconv.FormatFloat(float64(since.UnixNano())/1e9, 'f', 6, 64), up), time.Minute)
}

// instance selects a modelgate replica's target by its metrics address:
// the target's instance label (JobOptions.Loopback rewrites the
// discovered address to it).
func instance(addr string) string { return fmt.Sprintf("instance=%q", addr) }

// waitAllowed waits until the API server's authorizer allows user (in
// groups) attrs: RBAC reads roles and bindings from informers, so a
// binding just created does not act at once.
func waitAllowed(ctx context.Context, t *testing.T, k8s kubernetes.Interface, user string, groups []string, attrs *authorizationv1.ResourceAttributes) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return allowed(ctx, k8s, user, groups, attrs)
	})
	if err != nil {
		t.Fatalf("%s may not %s %s in %q: %v", user, attrs.Verb, attrs.Resource, attrs.Namespace, err)
	}
}

// allowed asks the API server's authorizer whether user may do attrs.
func allowed(ctx context.Context, k8s kubernetes.Interface, user string, groups []string, attrs *authorizationv1.ResourceAttributes) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: attrs}}
	got, err := k8s.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return got.Status.Allowed, nil
}

// reportKinds are the audit's report kinds vapYAML refuses.
var reportKinds = []schema.GroupVersionKind{
	{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"},
	{Group: "openreports.io", Version: "v1alpha1", Kind: "Report"},
}

// waitReports waits until the API server's admission refuses (refused)
// or admits (!refused) the audit's reports of both kinds, as vapYAML's
// policy and binding have it: it loads admission policies and bindings
// from a watch. It asks with server-side dry runs.
func waitReports(ctx context.Context, t *testing.T, admin client.Client, refused bool) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, gvk := range reportKinds {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			u.SetNamespace(team)
			u.SetName("prom-probe")
			last = admin.Create(ctx, u, client.DryRunAll)
			switch {
			case last != nil && !strings.Contains(last.Error(), vapMessage):
				return false, fmt.Errorf("a %s (dry run): %w", gvk.Kind, last)
			case (last != nil) != refused:
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for the API server to refuse=%t the audit's reports: %v (last answer: %v)", refused, err, last)
	}
}

// waitPolicyWebhook waits until the API server calls modelgate's
// validating webhook for WorkloadPolicies with the CA modelgate injected
// (self mode): modelgate is ready once the bundle is written, and the API
// server loads webhook configurations from a watch. It asks with
// server-side dry runs of a WorkloadPolicy, which the webhook admits.
func waitPolicyWebhook(ctx context.Context, t *testing.T, admin client.Client) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(policyYAML("prom-probe", `deny contains "never" if false`)), &u.Object); err != nil {
			return false, err
		}
		last = admin.Create(ctx, u, client.DryRunAll)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the API server to call modelgate's WorkloadPolicy webhook: %v (last answer: %v)", err, last)
	}
}
