package prometheus

import (
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func serviceMonitor(edit func(*monitoringv1.ServiceMonitor)) *monitoringv1.ServiceMonitor {
	sm := &monitoringv1.ServiceMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: "modelgate", Namespace: "modelgate-system"},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "modelgate"}},
			Endpoints: []monitoringv1.Endpoint{{
				Port: "metrics", Path: "/metrics", Scheme: ptr.To(monitoringv1.SchemeHTTPS),
			}},
		},
	}
	sm.Spec.Endpoints[0].Authorization = &monitoringv1.SafeAuthorization{Type: "Bearer",
		Credentials: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}
	if edit != nil {
		edit(sm)
	}
	return sm
}

// TestServiceMonitorJobsRefusesWhatItDoesNotTranslate: a ServiceMonitor
// field the translation would drop fails it, so the test cannot scrape
// otherwise than the Operator would.
func TestServiceMonitorJobsRefusesWhatItDoesNotTranslate(t *testing.T) {
	secret := func(corev1.SecretKeySelector) (string, error) { return "tok", nil }
	for name, tc := range map[string]struct {
		edit    func(*monitoringv1.ServiceMonitor)
		wantErr string
	}{
		"as shipped": {},
		"honorLabels": {edit: func(sm *monitoringv1.ServiceMonitor) { sm.Spec.Endpoints[0].HonorLabels = true },
			wantErr: "not translated"},
		"relabelings": {edit: func(sm *monitoringv1.ServiceMonitor) {
			sm.Spec.Endpoints[0].RelabelConfigs = []monitoringv1.RelabelConfig{{TargetLabel: "x"}}
		}, wantErr: "not translated"},
		"namespaceSelector": {edit: func(sm *monitoringv1.ServiceMonitor) { sm.Spec.NamespaceSelector.Any = true },
			wantErr: "not translated"},
		"matchExpressions": {edit: func(sm *monitoringv1.ServiceMonitor) {
			sm.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}
		}, wantErr: "matchExpressions"},
		"a CA to verify": {edit: func(sm *monitoringv1.ServiceMonitor) {
			sm.Spec.Endpoints[0].TLSConfig = &monitoringv1.TLSConfig{SafeTLSConfig: monitoringv1.SafeTLSConfig{ServerName: ptr.To("x")}}
		}, wantErr: "only insecureSkipVerify"},
	} {
		t.Run(name, func(t *testing.T) {
			jobs, err := ServiceMonitorJobs(serviceMonitor(tc.edit), APIServer{URL: "https://127.0.0.1:1"}, secret, JobOptions{})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "":
				auth, _ := jobs[0]["authorization"].(map[string]any)
				if len(jobs) != 1 || auth["credentials"] != "tok" || jobs[0]["scheme"] != "https" {
					t.Fatalf("jobs %+v: want one https job with the Secret's token", jobs)
				}
			}
		})
	}
}

// TestNeedsMarks: an expression reading another exporter's metrics must
// say so in its description.
func TestNeedsMarks(t *testing.T) {
	for name, tc := range map[string]struct {
		expr, description, want, wantErr string
	}{
		"modelgate's":            {expr: `sum(rate(modelgate_mutating_reviews_total[5m]))`},
		"the API server's":       {expr: `rate(apiserver_admission_webhook_rejection_count[5m]) > 0`},
		"kube-state-metrics":     {expr: `kube_deployment_status_replicas_available < 1`, description: "x. " + NeedsKubeStateMetrics, want: NeedsKubeStateMetrics},
		"cert-manager":           {expr: `certmanager_certificate_expiration_timestamp_seconds - time() < 1`, description: NeedsCertManager, want: NeedsCertManager},
		"unmarked":               {expr: `kube_pod_info`, description: "pods", wantErr: "must say"},
		"two other exporters":    {expr: `kube_pod_info + certmanager_certificate_ready_status`, description: NeedsKubeStateMetrics + NeedsCertManager, wantErr: "two other exporters"},
		"does not parse":         {expr: `sum(`, wantErr: "parsing"},
		"a name by regex is not": {expr: `{__name__=~"modelgate_.*"}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := exprNeeds(tc.expr, tc.description)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("exprNeeds = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDashboardQueriesSubstitutes the variables, longest name first, and
// refuses a variable without a value.
func TestDashboardQueriesSubstitutes(t *testing.T) {
	d := []byte(`{"panels": [{"title": "p", "targets": [{"expr": "rate(modelgate_x_total{namespace=~\"$namespace\"}[$__rate_interval]) + increase(modelgate_y_total[$__range])"}]}]}`)
	qs, err := DashboardQueries(d, DashboardVariables)
	if err != nil {
		t.Fatal(err)
	}
	want := `rate(modelgate_x_total{namespace=~"modelgate-system"}[1m]) + increase(modelgate_y_total[15m])`
	if len(qs) != 1 || qs[0].Expr != want {
		t.Fatalf("queries %+v, want one %q", qs, want)
	}
	if _, err := DashboardQueries(d, map[string]string{"$namespace": "x"}); err == nil || !strings.Contains(err.Error(), "no value") {
		t.Fatalf("error %v, want one saying a variable has no value", err)
	}
}
