package install

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

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	klabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// The Prometheus Operator kustomization (for kube-prometheus), and its
// overlay for kube-prometheus-stack.
const (
	prometheusObjects   = "config/prometheus"
	kubePrometheusStack = "config/prometheus/kube-prometheus-stack"
)

// The service accounts config/prometheus binds: the one Prometheus runs as
// (kube-prometheus's), which discovers the targets, and modelgate's
// scraper, whose token the ServiceMonitor scrapes with.
var (
	prometheusAccount = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "prometheus-k8s", Namespace: "monitoring"}
	scraperAccount    = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "modelgate-metrics-scraper", Namespace: env.Namespace}
)

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
// token of a ServiceAccount granted the shipped reader role, read from a
// Secret (no bearerTokenFile); Prometheus's own account may discover the
// targets; every alert and dashboard query parses and names
// only metrics modelgate exports (or the exporters it documents); every
// alert has a severity, a summary and a runbook section.
func TestPrometheusObjects(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.Render(filepath.Join(root, prometheusObjects))
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	for kind, n := range map[string]int{"Service": 1, "ServiceMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1, "ServiceAccount": 1, "Secret": 1,
		"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1} {
		if len(byKind[kind]) != n {
			t.Fatalf("%d %s, want %d", len(byKind[kind]), kind, n)
		}
	}
	var (
		svc  corev1.Service
		sm   monitoringv1.ServiceMonitor
		rule monitoringv1.PrometheusRule
		dash corev1.ConfigMap
		sa   corev1.ServiceAccount
		tok  corev1.Secret
		crb  rbacv1.ClusterRoleBinding
		role rbacv1.Role
		rb   rbacv1.RoleBinding
	)
	strict(t, byKind["Service"][0], &svc)
	strict(t, byKind["ServiceMonitor"][0], &sm)
	strict(t, byKind["PrometheusRule"][0], &rule)
	strict(t, byKind["ConfigMap"][0], &dash)
	strict(t, byKind["ServiceAccount"][0], &sa)
	strict(t, byKind["Secret"][0], &tok)
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
	// HTTPS with the scraper's token.
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
	if ep.Port != svc.Spec.Ports[0].Name || ep.Scheme == nil || *ep.Scheme != "https" || ep.Path != "/metrics" {
		t.Errorf("endpoint %+v: want port %q over https at /metrics", ep, svc.Spec.Ports[0].Name)
	}
	// Issue 33: a token from a Secret, not the Prometheus pod's file, which
	// the operator refuses where file access is denied (OpenShift's user
	// workload monitoring); the certificate is self-signed.
	if ep.BearerTokenFile != "" || ep.BearerTokenSecret != nil { //nolint:staticcheck // checking the deprecated fields are unset
		t.Errorf("endpoint uses bearerTokenFile %q or bearerTokenSecret %v: want authorization", ep.BearerTokenFile, ep.BearerTokenSecret) //nolint:staticcheck // as above
	}
	if a := ep.Authorization; a == nil || !strings.EqualFold(a.Type, "Bearer") || a.Credentials == nil ||
		a.Credentials.Name != tok.Name || a.Credentials.Key != corev1.ServiceAccountTokenKey {
		t.Errorf("endpoint authorization %+v: want type Bearer with key %s of Secret %s", a, corev1.ServiceAccountTokenKey, tok.Name)
	} else if err := a.Validate(); err != nil {
		t.Errorf("endpoint authorization: %v", err)
	}
	if ep.TLSConfig == nil || ep.TLSConfig.InsecureSkipVerify == nil || !*ep.TLSConfig.InsecureSkipVerify {
		t.Errorf("endpoint tlsConfig %+v: want insecureSkipVerify (controller-runtime's self-signed certificate)", ep.TLSConfig)
	}
	// The Secret is the scraper's token, beside the ServiceMonitor (the
	// operator reads credentials from the ServiceMonitor's namespace).
	if tok.Type != corev1.SecretTypeServiceAccountToken || tok.Annotations[corev1.ServiceAccountNameKey] != sa.Name || len(tok.Data)+len(tok.StringData) != 0 {
		t.Errorf("Secret %s: type %s, annotations %v, %d keys: want an empty %s naming ServiceAccount %s", tok.Name, tok.Type, tok.Annotations,
			len(tok.Data)+len(tok.StringData), corev1.SecretTypeServiceAccountToken, sa.Name)
	}
	if tok.Namespace != sm.Namespace || sa.Namespace != sm.Namespace {
		t.Errorf("Secret in %q, ServiceAccount in %q: want both in the ServiceMonitor's namespace %q", tok.Namespace, sa.Namespace, sm.Namespace)
	}
	if got := (rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}); got != scraperAccount {
		t.Errorf("scraper %v, want %v (the name test/harnesses/prometheus reads the token of)", got, scraperAccount)
	}
	// The binding grants the shipped reader role to the scraper only.
	if want := []rbacv1.Subject{scraperAccount}; !slices.Equal(crb.Subjects, want) {
		t.Errorf("ClusterRoleBinding %s subjects %v, want the scraper %v", crb.Name, crb.Subjects, want)
	}
	reader := false
	for _, cr := range ofType[*rbacv1.ClusterRole](install) {
		reader = reader || cr.Name == crb.RoleRef.Name && slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.NonResourceURLs, "/metrics") && slices.Contains(r.Verbs, "get")
		})
	}
	if !reader {
		t.Errorf("the binding grants ClusterRole %s, which is not the install's /metrics reader", crb.RoleRef.Name)
	}
	// Issue 33: Prometheus's own account may discover the targets in
	// modelgate's namespace (kube-prometheus grants it only its own
	// namespaces).
	if role.Namespace != svc.Namespace || rb.Namespace != svc.Namespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		t.Errorf("discovery Role %s/%s and RoleBinding %s/%s (role %v): want both in %s, bound to each other", role.Namespace, role.Name, rb.Namespace, rb.Name, rb.RoleRef, svc.Namespace)
	}
	if want := []rbacv1.Subject{prometheusAccount}; !slices.Equal(rb.Subjects, want) {
		t.Errorf("discovery RoleBinding subjects %v, want kube-prometheus's Prometheus %v", rb.Subjects, want)
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
			if m.Name != model.MetricNameLabel {
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

// exportedMetrics are the names of the metrics modelgate registers
// (registeredMetrics) and controller-runtime's webhook metrics.
func exportedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range controllerRuntimeWebhookMetrics {
		out[m] = true
	}
	for name := range registeredMetrics(t, root) {
		out[name] = true
	}
	if !out["modelgate_policies_loaded"] || !out["modelgate_mutating_reviews_total"] {
		t.Fatalf("found only %d metrics in the code: %v", len(out), out)
	}
	return out
}

// metricCode is what registeredMetrics found of one metric: its label
// names, when the code gives them as a literal where it names the metric.
type metricCode struct {
	labels      []string
	labelsKnown bool
}

// registeredMetrics are the metrics modelgate's non-test Go code
// registers, by name: the Name of every prometheus.*Opts literal, with the
// []string literal that follows it in a call (NewCounterVec(opts,
// labels)) as its labels, and every prometheus.NewDesc, with its third
// argument as its labels.
func registeredMetrics(t *testing.T, root string) map[string]metricCode {
	t.Helper()
	out := map[string]metricCode{}
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil && strings.HasPrefix(s, "modelgate_")
	}
	// strs returns the strings of a []string literal, or of nil.
	strs := func(e ast.Expr) ([]string, bool) {
		if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
			return nil, true
		}
		lit, ok := e.(*ast.CompositeLit)
		if !ok {
			return nil, false
		}
		var out []string
		for _, el := range lit.Elts {
			b, ok := el.(*ast.BasicLit)
			if !ok || b.Kind != token.STRING {
				return nil, false
			}
			s, err := strconv.Unquote(b.Value)
			if err != nil {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	// optsName returns the Name of a prometheus.*Opts literal.
	optsName := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.CompositeLit)
		if !ok {
			return "", false
		}
		if sel, ok := lit.Type.(*ast.SelectorExpr); !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
			return "", false
		}
		for _, el := range lit.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
					return str(kv.Value)
				}
			}
		}
		return "", false
	}
	// Every top-level folder but test/, hack/ and bin/ (the built tools),
	// rather than a list of them, which missed controller/ once the
	// controllers left internal/ and webhook/.
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !slices.Contains([]string{"test", "hack", "bin"}, e.Name()) {
			dirs = append(dirs, e.Name())
		}
	}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := goparser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					// prometheus.NewDesc("modelgate_...", help, labels, ...): a collector's.
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" && len(n.Args) > 2 {
						if name, ok := str(n.Args[0]); ok {
							labels, known := strs(n.Args[2])
							out[name] = metricCode{labels, known}
						}
						return true
					}
					// prometheus.NewCounterVec(prometheus.CounterOpts{...}, labels) and the like.
					if len(n.Args) > 0 {
						if name, ok := optsName(n.Args[0]); ok {
							mc := metricCode{labelsKnown: true} // NewGauge, NewGaugeFunc(opts, func): no labels
							if _, fn := n.Args[len(n.Args)-1].(*ast.FuncLit); len(n.Args) > 1 && !fn {
								mc.labels, mc.labelsKnown = strs(n.Args[1])
							}
							out[name] = mc
							return false // the Opts literal is done
						}
					}
				case *ast.CompositeLit:
					// An Opts literal not passed straight to its constructor.
					if name, ok := optsName(n); ok {
						if _, seen := out[name]; !seen {
							out[name] = metricCode{}
						}
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
	return out
}

// TestPrometheusMetricsDocumented: every metric modelgate registers has a
// row in the metrics table of docs/operations.md, with its labels.
func TestPrometheusMetricsDocumented(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs/operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Metrics and alerts\n")
	if start < 0 {
		t.Fatal(`docs/operations.md has no section "## Metrics and alerts"`)
	}
	doc = doc[start+1:]
	if end := strings.Index(doc, "\n## "); end >= 0 {
		doc = doc[:end]
	}
	code := regexp.MustCompile("`([^`]+)`")
	documented := map[string][]string{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		var labels []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			labels = append(labels, m[1])
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = labels
		}
	}
	registered := registeredMetrics(t, root)
	if len(registered) < 20 || !registered["modelgate_aiinference_phase"].labelsKnown {
		t.Fatalf("found %d metrics in the code: %v", len(registered), registered)
	}
	for name, mc := range registered {
		labels, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s is registered but has no row in the metrics table of docs/operations.md", name)
		case mc.labelsKnown && !slices.Equal(slices.Sorted(slices.Values(labels)), slices.Sorted(slices.Values(mc.labels))):
			t.Errorf("%s: docs/operations.md lists labels %q, the code %q", name, labels, mc.labels)
		}
	}
}

// TestPrometheusKubePrometheusStack: the overlay for kube-prometheus-stack
// labels the ServiceMonitor and the PrometheusRule for its Prometheus's
// selectors, and binds the discovery Role to that Prometheus's service
// account; the rest is config/prometheus's.
func TestPrometheusKubePrometheusStack(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base, err := render.Render(filepath.Join(root, prometheusObjects))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := render.Render(filepath.Join(root, kubePrometheusStack))
	if err != nil {
		t.Fatal(err)
	}
	stackAccount := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "kube-prometheus-stack-prometheus", Namespace: "monitoring"}
	byKey := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		out := map[string]map[string]any{}
		for _, u := range objs {
			out[u.GetKind()+"/"+u.GetName()] = u.Object
		}
		return out
	}
	labelled := 0
	var undone []*unstructured.Unstructured
	for _, u := range stack {
		u = u.DeepCopy()
		switch u.GetKind() {
		case "ServiceMonitor", "PrometheusRule":
			l := u.GetLabels()
			if l["release"] != "kube-prometheus-stack" {
				t.Errorf("%s %s labels %v: want release: kube-prometheus-stack", u.GetKind(), u.GetName(), l)
			}
			labelled++
			delete(l, "release")
			u.SetLabels(l)
		case "RoleBinding":
			var rb rbacv1.RoleBinding
			strict(t, u, &rb)
			if want := []rbacv1.Subject{stackAccount}; !slices.Equal(rb.Subjects, want) {
				t.Errorf("RoleBinding %s subjects %v, want kube-prometheus-stack's Prometheus %v", rb.Name, rb.Subjects, want)
			}
			subject := map[string]any{"kind": prometheusAccount.Kind, "name": prometheusAccount.Name, "namespace": prometheusAccount.Namespace}
			if err := unstructured.SetNestedSlice(u.Object, []any{subject}, "subjects"); err != nil {
				t.Fatal(err)
			}
		}
		undone = append(undone, u)
	}
	if labelled != 2 {
		t.Errorf("%d ServiceMonitors and PrometheusRules, want 1 of each", labelled)
	}
	if diff := cmp.Diff(byKey(base), byKey(undone)); diff != "" {
		t.Errorf("%s, but for the release label and the RoleBinding's subject, differs from %s (-want +got):\n%s", kubePrometheusStack, prometheusObjects, diff)
	}
}
