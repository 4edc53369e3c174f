package audit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Both outcomes of an audit pass exist at 0 from the start: the first
// failed pass shows as an increase to the audit's alert (issue 33).
func TestPassesStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "modelgate_audit_passes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	for _, outcome := range []string{"ok", "error"} {
		if v, ok := got[outcome]; !ok || v != 0 {
			t.Errorf("modelgate_audit_passes_total{outcome=%q}: %v (present %v), want 0 from the start", outcome, v, ok)
		}
	}
}
