package prometheus

import (
	"fmt"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"
)

// Needs marks, in an alert's description or a dashboard panel's, that it
// reads another exporter's metrics: a Prometheus without that exporter
// has no data for it.
const (
	NeedsKubeStateMetrics = "Needs kube-state-metrics."
	NeedsCertManager      = "Needs cert-manager."
)

// needsFor is the mark a metric name's exporter asks for, "" for the
// metrics modelgate and the API server serve.
func needsFor(metric string) string {
	switch {
	case strings.HasPrefix(metric, "kube_"):
		return NeedsKubeStateMetrics
	case strings.HasPrefix(metric, "certmanager_"):
		return NeedsCertManager
	}
	return ""
}

// RuleFile is the PrometheusRule's groups as a Prometheus rule file, as
// the Prometheus Operator writes it.
func RuleFile(pr *monitoringv1.PrometheusRule) ([]byte, error) {
	return yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
}

// Alert is one alerting rule of a PrometheusRule.
type Alert struct {
	Name, Expr string
	// Needs is the exporter the expression reads beside modelgate and the
	// API server (NeedsKubeStateMetrics, NeedsCertManager), "" for none.
	Needs string
}

// Alerts lists the alerting rules of pr. An expression reading another
// exporter's metrics must say so in its description (an error
// otherwise).
func Alerts(pr *monitoringv1.PrometheusRule) ([]Alert, error) {
	var out []Alert
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			a := Alert{Name: r.Alert, Expr: r.Expr.String()}
			needs, err := exprNeeds(a.Expr, r.Annotations["description"])
			if err != nil {
				return nil, fmt.Errorf("alert %s: %w", r.Alert, err)
			}
			a.Needs = needs
			out = append(out, a)
		}
	}
	return out, nil
}
