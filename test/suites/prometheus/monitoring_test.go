// Package prometheus_test runs config/prometheus under a real Prometheus
// (test/harnesses/prometheus): promtool's rule unit tests for every alert,
// then a live scrape of modelgate and the API server in the simulated
// cluster, with the configuration the real Prometheus Operator generates
// from the shipped ServiceMonitor and PrometheusRule, in which every alert
// goes pending or firing and every dashboard query returns series (but
// those needing an exporter the cluster lacks). `make test-prometheus`
// runs it, with the -modelgate, -prometheus, -promtool and
// -prometheus-operator binaries it builds.
package prometheus_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

var (
	modelgateBinary  = flag.String("modelgate", "", "the modelgate binary (bin/modelgate)")
	prometheusBinary = flag.String("prometheus", "", "the prometheus binary (bin/prometheus-<version>)")
	promtoolBinary   = flag.String("promtool", "", "the promtool binary (bin/promtool-<version>)")
	operatorBinary   = flag.String("prometheus-operator", "", "the Prometheus Operator binary (bin/prometheus-operator-<version>)")
)

const (
	namespace = "modelgate-system"
	// interval is how often Prometheus scrapes and evaluates the rules.
	interval = "2s"
	// team is the namespace the workloads are written in.
	team = "team-a"
)

// TestMonitoring installs the Prometheus Operator and config/prometheus's
// objects in the simulated cluster, has a real Prometheus scrape modelgate
// with the configuration the Operator generates from them (and the API
// server), causes each event the alerts watch, and asserts through
// Prometheus's API that every alert goes pending or firing and every
// dashboard query returns series, but those marked as needing another
// exporter (kube-state-metrics, cert-manager), which this cluster lacks.
func TestMonitoring(t *testing.T) {
	logf.SetLogger(logr.Discard())
	for name, f := range map[string]*string{"-modelgate": modelgateBinary, "-prometheus": prometheusBinary, "-promtool": promtoolBinary,
		"-prometheus-operator": operatorBinary} {
		if *f == "" {
			t.Fatalf("%s is required (make test-prometheus gives it)", name)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Kept when the test fails: the components' logs are there.
	dir, err := os.MkdirTemp("", "modelgate-prometheus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs and Prometheus's data are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})

	rendered, err := render.Render(filepath.Join(root, "config/prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := prometheus.Split(rendered)
	if err != nil {
		t.Fatalf("config/prometheus: %v", err)
	}
	alerts, err := prometheus.Alerts(objs.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	queries, err := prometheus.DashboardQueries(objs.Dashboard, prometheus.DashboardVariables)
	if err != nil {
		t.Fatal(err)
	}

	c := startCluster(ctx, t, root, dir)
	admin := newClient(t, c)
	k8s := kubernetes.NewForConfigOrDie(c.Admin)

	// The second replica enforces one policy file more than the first,
	// and later gets a file that does not compile.
	policyDir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(policyDir, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(policyDir, "extra.rego"), []byte("package prom.extra\n\ndeny contains \"never\" if false\n"))
	second, err := c.StartReplica(ctx, "second", func(cfg *config.Configuration) {
		cfg.Policy.Directory = policyDir
		// It does not lead: the audit and the AIInference controller
		// stay with the first.
		cfg.Controller.Enabled = ptr.To(false)
	})
	if err != nil {
		t.Fatal(err)
	}

	// The replicas' targets, by their instance label: the first is the
	// one the API server calls.
	first, other := instance(metricsAddr(t, c.Configuration)), instance(second.MetricsAddr)
	installMonitoring(ctx, t, root, dir, objs, admin, k8s, c, second)
	prom := startPrometheus(ctx, t, objs, dir, admin, c)
	waitTargets(ctx, t, prom, 3)

	// Everything but the broken policy file and the failed audit passes:
	// those must first be seen at 0 (the counters start there).
	drive(ctx, t, c, admin, prom, first)
	waitQuery(ctx, t, prom, `modelgate_policy_load_errors_total{source="directory", `+other+`} == 0`, time.Minute,
		func(got []prometheus.Series) bool { return len(got) == 1 })
	writeFile(t, filepath.Join(policyDir, "broken.rego"), []byte("package prom.broken\n\ndeny contains msg if {\n"))
	breakAudit(ctx, t, c, admin, prom, first)

	assertAlerts(ctx, t, prom, alerts)
	assertSummaries(ctx, t, prom)
	// The audit panels need a pass that wrote its results: let the
	// reports be written, and change the policies so a pass runs now.
	if err := admin.Delete(ctx, vapBinding()); err != nil {
		t.Fatal(err)
	}
	waitReports(ctx, t, admin, false)
	apply(ctx, t, admin, policyYAML("prom-later", `deny contains "never" if false`))
	// The pass the change starts, or the next periodic one (every minute).
	waitSeries(ctx, t, prom, `modelgate_audit_policy_workloads{result="fail"}`, 2*time.Minute)
	traffic(ctx, t, admin, 0)
	assertQueries(ctx, t, prom, queries)
}

// startCluster starts the simulated cluster without the real node, with
// modelgate serving secure metrics, managing its certificates (self mode,
// replaced every 30 s) and auditing nothing yet.
func startCluster(ctx context.Context, t *testing.T, root, dir string) *cluster.Cluster {
	t.Helper()
	metrics, err := cluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Options{
		Root: root, Dir: filepath.Join(dir, "cluster"), Modelgate: *modelgateBinary, User: "developer",
		MetricsAddr: metrics, RealNode: cluster.RealNodeOptions{Mode: cluster.RealNodeOff},
		ExtraRBAC: []string{"config/self-managed/rbac"},
		Configure: func(cfg *config.Configuration) {
			cfg.Metrics.Secure = ptr.To(true)
			s := &cfg.Certificates.Self
			cfg.Certificates.Mode = config.CertificatesSelf
			s.IPAddresses = []string{"127.0.0.1"}
			s.CALifetime.Duration, s.ServingLifetime.Duration, s.RenewBefore.Duration = time.Hour, 3*time.Minute, 150*time.Second
			s.InjectionGrace.Duration, s.CheckInterval.Duration = 2*time.Second, 2*time.Second
			cfg.Audit.Enabled = ptr.To(false)
		},
	})
	if err != nil {
		t.Fatalf("%v\nmodelgate.log (last lines):\n%s", err, cluster.Tail(filepath.Join(dir, "cluster", "logs", "modelgate.log"), 30))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs are in %s", c.LogDir)
			for _, f := range []string{"modelgate.log", "modelgate-second.log"} {
				t.Logf("%s (last lines):\n%s", f, cluster.Tail(filepath.Join(c.LogDir, f), 30))
			}
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func newClient(t *testing.T, c *cluster.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Admin, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// metricsAddr is the metrics address of the Configuration in path.
func metricsAddr(t *testing.T, path string) string {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Metrics.BindAddress
}

// waitTargets waits until Prometheus has scraped n targets successfully:
// both replicas through the Secret's token, and the API server.
func waitTargets(ctx context.Context, t *testing.T, s *prometheus.Server, n int) {
	t.Helper()
	last, err := s.WaitTargetsUp(ctx, n, 2*time.Minute)
	if err != nil {
		t.Fatalf("%v\n%s", err, describeTargets(last))
	}
	for _, tg := range last {
		if tg.Labels["job"] == "modelgate-metrics" && tg.Labels["namespace"] != namespace {
			t.Errorf("target %s: namespace label %q, want %q (the dashboard selects by it)", tg.ScrapeURL, tg.Labels["namespace"], namespace)
		}
	}
}

func describeTargets(ts []prometheus.Target) string {
	var b strings.Builder
	for _, tg := range ts {
		fmt.Fprintf(&b, "  %s %s %s\n", tg.ScrapeURL, tg.Health, tg.LastError)
	}
	return b.String()
}

// drive causes what the alerts watch, but for the policy load failure
// and the audit: a denial, a policy evaluation error, an AIInference
// that fails beside one that serves, an exception that expires within the
// day, reviews that modelgate fails (and that are slow: the namespace is
// waited for), and calls to the webhooks and the conversion webhook while
// modelgate is down. The certificates rotate on their own.
func drive(ctx context.Context, t *testing.T, c *cluster.Cluster, admin client.Client, prom *prometheus.Server, first string) {
	t.Helper()
	apply(ctx, t, admin, `apiVersion: v1
kind: Namespace
metadata:
  name: `+team+`
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-b
`)
	waitPolicyWebhook(ctx, t, admin)
	apply(ctx, t, admin, policyYAML("prom-deny", `deny contains "pods labelled prom-test=deny are denied" if input.workload.labels["prom-test"] == "deny"`))
	apply(ctx, t, admin, policyYAML("prom-error", `conflict := 1 if input.workload.labels["prom-test"] == "error"

conflict := 2 if input.workload.labels["prom-test"] == "error"

deny contains "never" if conflict == 3`))
	apply(ctx, t, admin, fmt.Sprintf(`apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicyException
metadata:
  name: prom-soon
  namespace: team-b
spec:
  policies: [prom-deny]
  expiresAt: %q
  reason: a benchmark that ends today
  ticket: OPS-1
`, time.Now().Add(2*time.Hour).UTC().Format(time.RFC3339)))

	// A rate sees a counter's first increment only from a sample before
	// it: modelgate counts each policy's decisions from 0 once it is
	// loaded, and Prometheus must have scraped that 0 (a policy in force
	// for longer than a scrape interval, as any in a real cluster) from
	// the replica the API server calls: the other's 0 does not do.
	waitQuery(ctx, t, prom, `modelgate_policy_evaluations_total{policy="prom-error", decision="error", `+first+`} == 0`, time.Minute,
		func(got []prometheus.Series) bool { return len(got) == 1 })

	// A denial, once the policy is in force; then an evaluation error.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := pod("denied", map[string]string{"prom-test": "deny"})
		err := admin.Create(ctx, p)
		if err == nil {
			// The policy is not in force yet.
			return false, admin.Delete(ctx, p)
		}
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "[prom-deny]"), nil
	})
	if err != nil {
		t.Fatalf("the denial: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := pod("conflict", map[string]string{"prom-test": "error"})
		err := admin.Create(ctx, p)
		if err == nil {
			return false, admin.Delete(ctx, p)
		}
		return strings.Contains(err.Error(), "[prom-error]"), nil
	})
	if err != nil {
		t.Fatalf("the evaluation error: %v", err)
	}
	if err := admin.Create(ctx, pod("plain", nil)); err != nil {
		t.Fatal(err)
	}

	// One AIInference serves, one fails: its Deployment's name is taken.
	apply(ctx, t, admin, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: taken
  namespace: `+team+`
spec:
  replicas: 0
  selector:
    matchLabels: {app: taken}
  template:
    metadata:
      labels: {app: taken}
    spec:
      containers:
      - name: c
        image: registry.invalid/none
`)
	apply(ctx, t, admin, aiInferenceYAML("serving")+"---\n"+aiInferenceYAML("taken"))
	waitPhase(ctx, t, admin, "serving", "Ready")
	waitPhase(ctx, t, admin, "taken", "Failed")

	// Reviews modelgate fails: the namespace does not exist, and is
	// waited for (namespaceCacheWait) before the error. Prometheus has
	// sampled the series they grow before them: the error counter (at 0
	// from the start) and the latency histogram (since the first review).
	waitSeries(ctx, t, prom, `modelgate_mutating_reviews_total{kind="Pod", operation="CREATE", outcome="error", `+first+`}`, time.Minute)
	waitSeries(ctx, t, prom, `controller_runtime_webhook_latency_seconds_count{webhook="/mutate", `+first+`}`, time.Minute)
	for i := range 5 {
		reviewAbsentNamespace(ctx, t, c, i)
	}

	// modelgate down: the API server's calls to its webhooks and to the
	// conversion webhook fail.
	if err := c.StopModelgate(); err != nil {
		t.Fatal(err)
	}
	failWhileDown(ctx, t, admin, prom)
}

// failWhileDown has the API server call modelgate's webhook and
// conversion webhook while it is down, twice, and waits after each time
// until Prometheus has scraped the API server since: its counters of
// failed calls are born at their first failure, and a rate sees them grow
// only from a sample after one failure and another after the next.
func failWhileDown(ctx context.Context, t *testing.T, admin client.Client, prom *prometheus.Server) {
	t.Helper()
	for range 2 {
		if err := admin.Create(ctx, pod("while-down", nil)); err == nil {
			t.Fatal("a pod was admitted while modelgate was down")
		}
		old := &unstructured.Unstructured{}
		old.SetGroupVersionKind(schema.GroupVersionKind{Group: "serving.modelgate.io", Version: "v1alpha1", Kind: "AIInference"})
		if err := admin.Get(ctx, client.ObjectKey{Namespace: team, Name: "serving"}, old); err == nil {
			t.Fatal("an AIInference was converted to v1alpha1 while modelgate was down")
		}
		waitScraped(ctx, t, prom, `job="apiserver"`, time.Now())
	}
}

// traffic writes Pods, denied and admitted, so that the answer latency
// and evaluation time panels have reviews of the last minute.
func traffic(ctx context.Context, t *testing.T, admin client.Client, round int) {
	t.Helper()
	for i := range 3 {
		name := fmt.Sprintf("traffic-%d-%d", round, i)
		if err := admin.Create(ctx, pod(name+"-denied", map[string]string{"prom-test": "deny"})); !apierrors.IsForbidden(err) {
			t.Fatalf("a pod labelled prom-test=deny: %v, want forbidden", err)
		}
		if err := admin.Create(ctx, pod(name, nil)); err != nil {
			t.Fatal(err)
		}
	}
}

// breakAudit has an admission policy refuse the audit's reports, and
// restarts modelgate with the audit on once the API server enforces it:
// each of its passes fails. It returns once Prometheus has counted a
// failed pass and no other (the audit's alert also fires on a replica
// that never completed a pass, which alone would not show the failure).
func breakAudit(ctx context.Context, t *testing.T, c *cluster.Cluster, admin client.Client, prom *prometheus.Server, first string) {
	t.Helper()
	apply(ctx, t, admin, vapYAML)
	waitReports(ctx, t, admin, true)
	if err := c.StartModelgate(ctx, func(cfg *config.Configuration) {
		cfg.Audit.Enabled = ptr.To(true)
		cfg.Audit.Interval = &metav1.Duration{Duration: time.Minute}
	}); err != nil {
		t.Fatal(err)
	}
	// The first pass runs once the restarted replica leads, 15 s after.
	waitSeries(ctx, t, prom, `(modelgate_audit_passes_total{outcome="error", `+first+`} > 0) and on (instance) (modelgate_audit_passes_total{outcome="ok", `+first+`} == 0)`, 2*time.Minute)
}

// assertAlerts waits until every alert that reads only modelgate's and
// the API server's metrics is pending or firing, and requires every rule
// to evaluate without error.
func assertAlerts(ctx context.Context, t *testing.T, s *prometheus.Server, alerts []prometheus.Alert) {
	t.Helper()
	var states map[string]prometheus.Rule
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := s.AlertRules(ctx)
		if err != nil {
			return false, err
		}
		states = got
		for _, a := range alerts {
			if r := states[a.Name]; a.Needs == "" && r.State != "pending" && r.State != "firing" {
				return false, nil
			}
		}
		return true, nil
	})
	for _, a := range alerts {
		r, ok := states[a.Name]
		switch {
		case !ok:
			t.Errorf("alert %s: not loaded", a.Name)
		case r.Health == "err":
			t.Errorf("alert %s: evaluation fails: %s", a.Name, r.LastError)
		case a.Needs != "":
			t.Logf("alert %-45s %s (not asserted: %s)", a.Name, r.State, a.Needs)
		case r.State != "pending" && r.State != "firing":
			t.Errorf("alert %s: %s, want pending or firing; expr: %s", a.Name, r.State, a.Expr)
		default:
			t.Logf("alert %-45s %s", a.Name, r.State)
		}
	}
	if err != nil {
		t.Fatalf("waiting for the alerts: %v", err)
	}
}

// assertSummaries requires the alerts' annotations to name what they are
// about, as Prometheus renders them from the series' labels (a metric
// label that a target label shadows renders as the target's).
func assertSummaries(ctx context.Context, t *testing.T, s *prometheus.Server) {
	t.Helper()
	active, err := s.ActiveAlerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ModelgatePolicyExceptionExpiresSoon": "WorkloadPolicyException team-b/prom-soon expires within a day",
		"ModelgatePolicyEvaluationErrors":     "prom-error",
		"ModelgatePolicyLoadFailures":         "A directory policy did not load",
	}
	for _, a := range active {
		name := a.Labels["alertname"]
		if w, ok := want[name]; ok && strings.Contains(a.Annotations["summary"], w) {
			delete(want, name)
		}
	}
	for name, w := range want {
		t.Errorf("alert %s: no active alert's summary says %q", name, w)
	}
}

// assertQueries waits until every dashboard query that reads only
// modelgate's and the API server's metrics returns series.
func assertQueries(ctx context.Context, t *testing.T, s *prometheus.Server, queries []prometheus.Query) {
	t.Helper()
	got := map[string]int{}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		all := true
		// A query the poll's end cuts short keeps its last answer.
		for _, q := range queries {
			series, err := s.Query(ctx, q.Expr)
			if err != nil {
				return false, err
			}
			got[q.Expr] = len(series)
			all = all && (q.Needs != "" || len(series) > 0)
		}
		return all, nil
	})
	for _, q := range queries {
		switch n := got[q.Expr]; {
		case q.Needs != "":
			t.Logf("panel %q: %d series (not asserted: %s): %s", q.Panel, n, q.Needs, q.Expr)
		case n == 0:
			t.Errorf("panel %q: no series: %s", q.Panel, q.Expr)
		default:
			t.Logf("panel %q: %d series: %s", q.Panel, n, q.Expr)
		}
	}
	if err != nil {
		t.Fatalf("querying the dashboard: %v", err)
	}
}

func waitPhase(ctx context.Context, t *testing.T, admin client.Client, name, phase string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "serving.modelgate.io", Version: "v1", Kind: "AIInference"})
		if err := admin.Get(ctx, client.ObjectKey{Namespace: team, Name: name}, u); err != nil {
			return false, err
		}
		last, _, _ = unstructured.NestedString(u.Object, "status", "phase")
		return last == phase, nil
	})
	if err != nil {
		t.Fatalf("AIInference %s: phase %q, want %s: %v", name, last, phase, err)
	}
}

// reviewAbsentNamespace sends modelgate's mutating webhook, as the API
// server would, a review of a Pod in a namespace that does not exist.
func reviewAbsentNamespace(ctx context.Context, t *testing.T, c *cluster.Cluster, i int) {
	t.Helper()
	cfg, err := config.Load(c.Configuration)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(pod("nowhere-"+strconv.Itoa(i), nil))
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("absent-" + strconv.Itoa(i)), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: "absent",
			Name: "nowhere-" + strconv.Itoa(i), Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("https://%s:%d/mutate", cfg.Webhook.Host, cfg.Webhook.Port)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, addr, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	// The API server trusts the injected CA; this client only needs an
	// answer.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &got); err != nil || got.Response == nil {
		t.Fatalf("review of a pod in an absent namespace: %s: %s", resp.Status, b)
	}
	if got.Response.Allowed || got.Response.Result == nil || got.Response.Result.Code != http.StatusInternalServerError {
		t.Fatalf("review of a pod in an absent namespace: want an error (500), got %s", b)
	}
}

// pod is a Pod that opts in to modelgate (so its webhooks and policies
// see it).
func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: team, Labels: labels,
			Annotations: map[string]string{"modelgate.io/inject": "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/none"}}},
	}
}

func policyYAML(name, rules string) string {
	indented := "    " + strings.ReplaceAll(rules, "\n", "\n    ")
	return fmt.Sprintf(`apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata:
  name: %s
spec:
  enforcementAction: deny
  failurePolicy: deny
  match:
    kinds: [Pod]
  rego: |
    package prom.%s

%s
`, name, strings.ReplaceAll(name, "-", "_"), indented)
}

// aiInferenceYAML is an AIInference on one GPU of the fake nodes.
func aiInferenceYAML(name string) string {
	return `apiVersion: serving.modelgate.io/v1
kind: AIInference
metadata:
  name: ` + name + `
  namespace: ` + team + `
spec:
  model:
    uri: hf://acme-ai/tiny-model
    revision: d405eb6e2a3155ea06886b81d079f256f9cd6a68
  engine:
    name: vllm
  gpu:
    count: 1
  replicas: 1
`
}

// vapYAML refuses modelgate's writes of audit reports, as another
// admission controller of the cluster might, saying vapMessage.
const vapYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: prom-no-reports
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [wgpolicyk8s.io, openreports.io]
      apiVersions: ["*"]
      operations: [CREATE, UPDATE]
      resources: ["*"]
  validations:
  - expression: "false"
    message: ` + vapMessage + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: prom-no-reports
spec:
  policyName: prom-no-reports
  validationActions: [Deny]
`

const vapMessage = "audit reports are frozen"

func vapBinding() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"})
	u.SetName("prom-no-reports")
	return u
}

// apply creates every object of a YAML stream.
func apply(ctx context.Context, t *testing.T, c client.Client, stream string) {
	t.Helper()
	for doc := range strings.SplitSeq(stream, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
