package env

import (
	"encoding/json"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	klabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// prometheusObjects is the Prometheus Operator kustomization.
const prometheusObjects = "config/prometheus"

// otherExporters are the metrics the alerts and the dashboard read from
// other exporters: kube-state-metrics, cert-manager, the API server.
var otherExporters = []string{
	"kube_deployment_status_replicas_available",
	"kube_pod_init_container_status_terminated_reason",
	"kube_pod_init_container_status_restarts_total",
	"certmanager_certificate_expiration_timestamp_seconds",
	"apiserver_admission_webhook_rejection_count",
	"apiserver_crd_conversion_webhook_duration_seconds_count",
}

// controllerRuntimeWebhookMetrics are the webhook server's metrics that
// controller-runtime registers for modelgate.
var controllerRuntimeWebhookMetrics = []string{
	"controller_runtime_webhook_requests_total",
	"controller_runtime_webhook_latency_seconds",
	"controller_runtime_webhook_requests_in_flight",
}

// TestPrometheusObjects: the ServiceMonitor scrapes the metrics port the
// Deployment declares, through a Service that selects its pods, with the
// shipped reader role; every alert and dashboard query parses and names
// only metrics modelgate exports (or the exporters it documents); every
// alert has a severity, a summary and a runbook section.
func TestPrometheusObjects(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(filepath.Join(root, prometheusObjects))
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	for kind, n := range map[string]int{"Service": 1, "ServiceMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1} {
		if len(byKind[kind]) != n {
			t.Fatalf("%d %s, want %d", len(byKind[kind]), kind, n)
		}
	}
	var (
		svc  corev1.Service
		sm   monitoringv1.ServiceMonitor
		rule monitoringv1.PrometheusRule
		dash corev1.ConfigMap
		crb  rbacv1.ClusterRoleBinding
		role rbacv1.Role
		rb   rbacv1.RoleBinding
	)
	strict(t, byKind["Service"][0], &svc)
	strict(t, byKind["ServiceMonitor"][0], &sm)
	strict(t, byKind["PrometheusRule"][0], &rule)
	strict(t, byKind["ConfigMap"][0], &dash)
	strict(t, byKind["ClusterRoleBinding"][0], &crb)
	strict(t, byKind["Role"][0], &role)
	strict(t, byKind["RoleBinding"][0], &rb)

	// The Service selects the Deployment's pods, on its metrics port.
	install := decoded(t, defaultInstall)
	d := only[*appsv1.Deployment](t, install)
	if !klabels.SelectorFromSet(svc.Spec.Selector).Matches(klabels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Service %s selects %v, which the Deployment's pods (%v) do not match", svc.Name, svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if svc.Namespace != d.Namespace {
		t.Errorf("Service in %s, Deployment in %s", svc.Namespace, d.Namespace)
	}
	c := modelgateContainer(t, d)
	if len(svc.Spec.Ports) != 1 || !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == svc.Spec.Ports[0].TargetPort.String() && p.ContainerPort == svc.Spec.Ports[0].Port
	}) {
		t.Errorf("Service ports %v: want the container's metrics port (%v)", svc.Spec.Ports, c.Ports)
	}
	// The ServiceMonitor selects the Service and scrapes that port over
	// HTTPS with the Prometheus token.
	sel, err := metav1LabelSelector(sm)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(klabels.Set(svc.Labels)) {
		t.Errorf("ServiceMonitor selects %v, which the Service's labels %v do not match", sm.Spec.Selector, svc.Labels)
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != svc.Spec.Ports[0].Name || ep.Scheme == nil || *ep.Scheme != "https" || ep.Path != "/metrics" || ep.BearerTokenFile == "" { //nolint:staticcheck // bearerTokenFile: the Prometheus pod's own token.
		t.Errorf("endpoint %+v: want port %q over https at /metrics with the Prometheus token", ep, svc.Spec.Ports[0].Name)
	}
	// The binding grants the shipped reader role.
	reader := false
	for _, cr := range ofType[*rbacv1.ClusterRole](install) {
		reader = reader || cr.Name == crb.RoleRef.Name && slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.NonResourceURLs, "/metrics") && slices.Contains(r.Verbs, "get")
		})
	}
	if !reader {
		t.Errorf("the binding grants ClusterRole %s, which is not the install's /metrics reader", crb.RoleRef.Name)
	}
	// Issue 33: the same Prometheus may discover the targets in modelgate's
	// namespace (kube-prometheus grants it only its own namespaces).
	if role.Namespace != svc.Namespace || rb.Namespace != svc.Namespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		t.Errorf("discovery Role %s/%s and RoleBinding %s/%s (role %v): want both in %s, bound to each other", role.Namespace, role.Name, rb.Namespace, rb.Name, rb.RoleRef, svc.Namespace)
	}
	if !slices.Equal(rb.Subjects, crb.Subjects) {
		t.Errorf("discovery RoleBinding subjects %v, metrics reader binding's %v: want the same Prometheus", rb.Subjects, crb.Subjects)
	}
	grants := func(group, resource string) bool {
		return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) &&
				slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch")
		})
	}
	for _, gr := range [][2]string{{"", "services"}, {"", "endpoints"}, {"", "pods"}, {"discovery.k8s.io", "endpointslices"}} {
		if !grants(gr[0], gr[1]) {
			t.Errorf("discovery Role does not let Prometheus list and watch %q %s", gr[0], gr[1])
		}
	}

	exported := exportedMetrics(t, root)
	runbook, err := os.ReadFile(filepath.Join(root, "docs/runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbook), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			checkQuery(t, "alert "+r.Alert, r.Expr.String(), exported)
			if r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: no summary or description", r.Alert)
			}
			url := r.Annotations["runbook_url"]
			anchor := strings.ToLower(r.Alert)
			if !strings.HasSuffix(url, "docs/runbooks.md#"+anchor) || !sections[anchor] {
				t.Errorf("alert %s: runbook_url %q, want docs/runbooks.md#%s with a section \"## %s\"", r.Alert, url, anchor, r.Alert)
			}
		}
	}
	if alerts < 12 {
		t.Errorf("%d alerts, want the 12 of docs/operations.md at least", alerts)
	}

	// The dashboard: Grafana's sidecar label, and queries that parse.
	if dash.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: want grafana_dashboard: \"1\"", dash.Labels)
	}
	var board struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(dash.Data["modelgate.json"]), &board); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	queries := 0
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$namespace", "modelgate-system")
	for _, p := range board.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			checkQuery(t, "dashboard panel "+strconv.Quote(p.Title), grafana.Replace(q.Expr), exported)
		}
	}
	if board.UID == "" || queries < 10 {
		t.Errorf("dashboard uid %q with %d queries", board.UID, queries)
	}
}

// strict decodes an object into its Go type, refusing unknown fields.
func strict(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func metav1LabelSelector(sm monitoringv1.ServiceMonitor) (klabels.Selector, error) {
	return klabels.ValidatedSelectorFromSet(sm.Spec.Selector.MatchLabels)
}

// checkQuery fails the test unless q parses as PromQL and every metric it
// selects is one modelgate exports or one of otherExporters; a name given
// by a regular expression must match modelgate's metrics only, and some.
func checkQuery(t *testing.T, where, q string, exported map[string]bool) {
	t.Helper()
	expr, err := parser.ParseExpr(q)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, q, err)
		return
	}
	known := func(name string) bool {
		if exported[name] || slices.Contains(otherExporters, name) {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && exported[base] {
				return true
			}
		}
		return false
	}
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			if !known(vs.Name) {
				t.Errorf("%s: %s is not a metric modelgate exports", where, vs.Name)
			}
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				continue
			}
			matched := 0
			for name := range exported {
				if m.Matches(name) {
					matched++
				}
			}
			if matched == 0 {
				t.Errorf("%s: %s matches no metric modelgate exports", where, m)
			}
		}
		return nil
	})
}

// exportedMetrics are the names of the metrics modelgate registers: the
// Name of every Prometheus Opts literal in its non-test Go code, and
// controller-runtime's webhook metrics.
func exportedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range controllerRuntimeWebhookMetrics {
		out[m] = true
	}
	fset := token.NewFileSet()
	for _, dir := range []string{"webhook", "internal", "certs", "cmd", "mutators", "policies", "validators", "loader", "audit"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := goparser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				// prometheus.NewDesc("modelgate_...", ...): a collector's.
				if call, ok := n.(*ast.CallExpr); ok && len(call.Args) > 0 {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" {
						if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "modelgate_") {
								out[s] = true
							}
						}
					}
					return true
				}
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Name" {
					return true
				}
				if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "modelgate_") {
						out[s] = true
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !out["modelgate_policies_loaded"] || !out["modelgate_mutating_reviews_total"] {
		t.Fatalf("found only %d metrics in the code: %v", len(out), out)
	}
	return out
}
