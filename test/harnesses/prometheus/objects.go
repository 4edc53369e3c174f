package prometheus

import (
	"errors"
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Objects are an install of config/prometheus, split into what the
// Prometheus Operator and Grafana read and what is applied as it is.
type Objects struct {
	ServiceMonitor *monitoringv1.ServiceMonitor
	PrometheusRule *monitoringv1.PrometheusRule
	// Dashboard is the Grafana dashboard's JSON.
	Dashboard []byte
	// Monitoring are the ServiceMonitor and the PrometheusRule as
	// rendered, for the Operator.
	Monitoring []*unstructured.Unstructured
	// Others are the rest: the Service, the RBAC, the scraper's service
	// account and token Secret.
	Others []*unstructured.Unstructured
}

// dashboardKey is the dashboard ConfigMap's key.
const dashboardKey = "modelgate.json"

// Split sorts rendered objects (render.Render of config/prometheus). It
// returns an error unless there is exactly one ServiceMonitor,
// PrometheusRule and dashboard, each decoding strictly.
func Split(objs []*unstructured.Unstructured) (*Objects, error) {
	o := &Objects{}
	strict := func(u *unstructured.Unstructured, into any) error {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
			return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return nil
	}
	for _, u := range objs {
		switch {
		case u.GetKind() == monitoringv1.ServiceMonitorsKind && o.ServiceMonitor == nil:
			o.ServiceMonitor = &monitoringv1.ServiceMonitor{}
			if err := strict(u, o.ServiceMonitor); err != nil {
				return nil, err
			}
			o.Monitoring = append(o.Monitoring, u)
		case u.GetKind() == monitoringv1.PrometheusRuleKind && o.PrometheusRule == nil:
			o.PrometheusRule = &monitoringv1.PrometheusRule{}
			if err := strict(u, o.PrometheusRule); err != nil {
				return nil, err
			}
			o.Monitoring = append(o.Monitoring, u)
		case u.GetKind() == "ConfigMap" && o.Dashboard == nil:
			d, ok, err := unstructured.NestedString(u.Object, "data", dashboardKey)
			if err != nil || !ok {
				return nil, fmt.Errorf("ConfigMap %s has no %s", u.GetName(), dashboardKey)
			}
			o.Dashboard = []byte(d)
		case u.GetKind() == monitoringv1.ServiceMonitorsKind, u.GetKind() == monitoringv1.PrometheusRuleKind, u.GetKind() == "ConfigMap":
			return nil, fmt.Errorf("a second %s: %s", u.GetKind(), u.GetName())
		default:
			o.Others = append(o.Others, u)
		}
	}
	if o.ServiceMonitor == nil || o.PrometheusRule == nil || o.Dashboard == nil {
		return nil, errors.New("want a ServiceMonitor, a PrometheusRule and a dashboard ConfigMap")
	}
	return o, nil
}
