package prometheus_test

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// ruleCase is one alert under promtool's rule unit tests: series that are
// healthy for the first 10 minutes and then go bad, the alert quiet at
// 5m, and firing at firingAt (past its for) with labels. quietAgainAt,
// when set, is a time the alert has cleared.
type ruleCase struct {
	alert        string
	series       map[string]string
	firingAt     string
	labels       map[string]string
	quietAgainAt string
}

// Values for the certificate gauges: expiry timestamps, in seconds since
// the start of the test's clock (promtool's time() starts at 0).
const (
	days100 = "8640000" // healthy
	days27  = "2332800" // under the 28 days of the rotation alerts
	days6   = "518400"  // under the 7 days of ModelgateCertificateExpiresSoon
)

// ruleCases covers every alert of config/prometheus, those that need
// kube-state-metrics or cert-manager too (their series are written here).
var ruleCases = []ruleCase{
	{alert: "ModelgateNoReadyReplica",
		series:   map[string]string{`kube_deployment_status_replicas_available{namespace="modelgate-system",deployment="modelgate"}`: "2x10 0x20"},
		firingAt: "15m", labels: map[string]string{"namespace": "modelgate-system", "deployment": "modelgate", "severity": "critical"}},
	{alert: "ModelgateOneReplica",
		series:   map[string]string{`kube_deployment_status_replicas_available{namespace="modelgate-system",deployment="modelgate"}`: "2x10 1x30"},
		firingAt: "30m", labels: map[string]string{"namespace": "modelgate-system", "deployment": "modelgate", "severity": "warning"}},
	{alert: "ModelgateCertificateNotRotated",
		series:   map[string]string{`modelgate_serving_certificate_expiry_timestamp_seconds{instance="10.0.0.1:8443"}`: days100 + "x10 " + days27 + "x80"},
		firingAt: "80m", labels: map[string]string{"instance": "10.0.0.1:8443", "severity": "warning"}},
	{alert: "ModelgateCertificateExpiresSoon",
		series:   map[string]string{`modelgate_serving_certificate_expiry_timestamp_seconds{instance="10.0.0.1:8443"}`: days100 + "x10 " + days6 + "x20"},
		firingAt: "15m", labels: map[string]string{"instance": "10.0.0.1:8443", "severity": "critical"}},
	{alert: "ModelgateCertManagerCertificateNotRenewed",
		series:   map[string]string{`certmanager_certificate_expiration_timestamp_seconds{namespace="modelgate-system",name="modelgate-webhook"}`: days100 + "x10 " + days27 + "x80"},
		firingAt: "80m", labels: map[string]string{"namespace": "modelgate-system", "name": "modelgate-webhook", "severity": "warning"}},
	// Both counters have the same labels once rate drops their names:
	// the expression must not put them in one vector.
	{alert: "ModelgateReviewErrors",
		series: map[string]string{
			`modelgate_mutating_reviews_total{kind="Pod",operation="CREATE",outcome="error"}`:   "0x10 1+1x20",
			`modelgate_validating_reviews_total{kind="Pod",operation="CREATE",outcome="error"}`: "0x30",
		},
		firingAt: "20m", labels: map[string]string{"severity": "warning"}},
	{alert: "ModelgateWebhookCallFailures",
		series: map[string]string{
			`apiserver_admission_webhook_rejection_count{name="workload.validate.modelgate.io",type="validating",operation="CREATE",error_type="calling_webhook_error",rejection_code="0"}`: "0x10 1+1x20",
		},
		firingAt: "20m", labels: map[string]string{"name": "workload.validate.modelgate.io", "severity": "critical"}},
	{alert: "ModelgateConversionFailures",
		series: map[string]string{
			`apiserver_crd_conversion_webhook_duration_seconds_count{crd_name="aiinferences.serving.modelgate.io",from_version="serving.modelgate.io/v1",to_version="serving.modelgate.io/v1alpha1",succeeded="false"}`: "0x10 1+1x20",
		},
		firingAt: "20m", labels: map[string]string{"severity": "warning"}},
	{alert: "ModelgatePolicyEvaluationErrors",
		series:   map[string]string{`modelgate_policy_evaluations_total{policy="max-gpus-per-pod",decision="error"}`: "0x10 1+1x30"},
		firingAt: "25m", labels: map[string]string{"policy": "max-gpus-per-pod", "severity": "warning"}},
	// One failure: the alert holds for the 15 minutes after it, then
	// clears.
	{alert: "ModelgatePolicyLoadFailures",
		series:   map[string]string{`modelgate_policy_load_errors_total{source="workloadpolicy"}`: "0x10 1x30"},
		firingAt: "15m", labels: map[string]string{"source": "workloadpolicy", "severity": "warning"}, quietAgainAt: "30m"},
	{alert: "ModelgateReplicasDisagree",
		series: map[string]string{
			`modelgate_policies_loaded{instance="10.0.0.1:8443"}`: "8x40",
			`modelgate_policies_loaded{instance="10.0.0.2:8443"}`: "8x10 7x30",
		},
		firingAt: "25m", labels: map[string]string{"severity": "warning"}},
	// Ten reviews a minute under 0.1 s, then ten between 1 and 2.5 s.
	{alert: "ModelgateSlowReviews",
		series: map[string]string{
			`controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="0.1"}`:  "0+10x10 100x30",
			`controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="1"}`:    "0+10x10 100x30",
			`controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="2.5"}`:  "0+10x40",
			`controller_runtime_webhook_latency_seconds_bucket{webhook="/validate",le="+Inf"}`: "0+10x40",
		},
		firingAt: "30m", labels: map[string]string{"webhook": "/validate", "severity": "warning"}},
	{alert: "ModelgateAIInferenceFailed",
		series:   map[string]string{`modelgate_aiinference_phase{phase="Failed"}`: "0x10 1x30"},
		firingAt: "30m", labels: map[string]string{"severity": "warning"}},
	// Passes every minute, then none after 10m: over an hour since the
	// last at 70m, firing 15 minutes later.
	{alert: "ModelgateAuditNotRunning",
		series: map[string]string{
			`modelgate_audit_last_pass_timestamp_seconds`:   "0+60x10 600x100",
			`modelgate_audit_passes_total{outcome="ok"}`:    "0+1x10 10x100",
			`modelgate_audit_passes_total{outcome="error"}`: "0x110",
		},
		firingAt: "90m", labels: map[string]string{"severity": "warning"}},
	{alert: "ModelgatePolicyExceptionExpiresSoon",
		series: map[string]string{
			`modelgate_policy_exception_expiry_timestamp_seconds{exception_namespace="team-b",name="bench",ticket="OPS-1"}`: days100 + "x10 18000x20",
		},
		firingAt: "15m", labels: map[string]string{"exception_namespace": "team-b", "name": "bench", "ticket": "OPS-1", "severity": "warning"}},
}

// auditFailingCase is ModelgateAuditNotRunning's other way: passes run
// (the timestamp is fresh) but every one of the last hour failed.
var auditFailingCase = ruleCase{alert: "ModelgateAuditNotRunning",
	series: map[string]string{
		`modelgate_audit_last_pass_timestamp_seconds`:   "0+60x100",
		`modelgate_audit_passes_total{outcome="ok"}`:    "0x100",
		`modelgate_audit_passes_total{outcome="error"}`: "0x10 1+1x50",
	},
	firingAt: "30m", labels: map[string]string{"severity": "warning"}}

// TestAlertRulesUnderPromtool runs every alert of config/prometheus
// through promtool's rule unit tests: each is quiet on healthy series,
// fires with the labels and rendered annotations it should once they go
// bad and its for has passed, and the ones that should, clear. It covers
// the alerts the live test (TestMonitoring) cannot cause: those reading
// kube-state-metrics and cert-manager, and those whose for is an hour.
func TestAlertRulesUnderPromtool(t *testing.T) {
	if *promtoolBinary == "" {
		t.Fatal("-promtool is required (make test-prometheus gives it)")
	}
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := render.Render(filepath.Join(root, "config/prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := prometheus.Split(rendered)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	b, err := prometheus.RuleFile(objs.PrometheusRule)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, rules, b)

	annotations := alertAnnotations(objs.PrometheusRule)
	covered := map[string]bool{}
	var groups []any
	for _, c := range append(slices.Clone(ruleCases), auditFailingCase) {
		a, ok := annotations[c.alert]
		if !ok {
			t.Fatalf("case for %s: no such alert in config/prometheus", c.alert)
		}
		covered[c.alert] = true
		expAnnotations, err := renderAnnotations(a, c.labels)
		if err != nil {
			t.Fatalf("%s: %v", c.alert, err)
		}
		var series []any
		for _, name := range slices.Sorted(maps.Keys(c.series)) {
			series = append(series, map[string]any{"series": name, "values": c.series[name]})
		}
		tests := []any{
			map[string]any{"eval_time": "5m", "alertname": c.alert, "exp_alerts": []any{}},
			map[string]any{"eval_time": c.firingAt, "alertname": c.alert, "exp_alerts": []any{
				map[string]any{"exp_labels": c.labels, "exp_annotations": expAnnotations},
			}},
		}
		if c.quietAgainAt != "" {
			tests = append(tests, map[string]any{"eval_time": c.quietAgainAt, "alertname": c.alert, "exp_alerts": []any{}})
		}
		groups = append(groups, map[string]any{"name": c.alert, "interval": "1m", "input_series": series, "alert_rule_test": tests})
	}
	for name := range annotations {
		if !covered[name] {
			t.Errorf("alert %s has no case in ruleCases", name)
		}
	}
	test, err := yaml.Marshal(map[string]any{"rule_files": []string{rules}, "evaluation_interval": "1m", "tests": groups})
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "rules_test.yaml")
	writeFile(t, testFile, test)
	out, err := exec.Command(*promtoolBinary, "test", "rules", testFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	t.Logf("promtool test rules: %d alerts, %d cases: %s", len(annotations), len(groups), strings.TrimSpace(string(out)))
}

// alertAnnotations are the alerts' annotations, by alert.
func alertAnnotations(pr *monitoringv1.PrometheusRule) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Annotations
			}
		}
	}
	return out
}

// labelRef is the one template the alerts' annotations use.
var labelRef = regexp.MustCompile(`\{\{\s*\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// renderAnnotations fills an alert's annotations with the alert's labels, as
// Prometheus does for {{ $labels.x }}; any other template is an error
// (write its expected text here first).
func renderAnnotations(annotations, labels map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range annotations {
		var missing []string
		s := labelRef.ReplaceAllStringFunc(v, func(m string) string {
			name := labelRef.FindStringSubmatch(m)[1]
			value, ok := labels[name]
			if !ok {
				missing = append(missing, name)
			}
			return value
		})
		if len(missing) > 0 {
			return nil, fmt.Errorf("annotation %s reads labels %v the alert does not have", k, missing)
		}
		if strings.Contains(s, "{{") {
			return nil, fmt.Errorf("annotation %s: a template other than {{ $labels.x }}: %q", k, v)
		}
		out[k] = s
	}
	return out, nil
}
