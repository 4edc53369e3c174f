package aiinference

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"

	servingv1 "github.com/modelgate/modelgate/api/v1"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	created := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	a, b := types.NamespacedName{Namespace: "ml", Name: "a"}, types.NamespacedName{Namespace: "ml", Name: "b"}

	m.observe(a, "", servingv1.PhasePending, created, created.Add(time.Second))
	m.observe(b, "", servingv1.PhasePending, created, created.Add(time.Second))
	m.observe(a, servingv1.PhasePending, servingv1.PhaseLoading, created, created.Add(10*time.Second))
	m.observe(a, servingv1.PhaseLoading, servingv1.PhaseReady, created, created.Add(90*time.Second))
	// A reconcile that changes nothing counts nothing.
	m.observe(a, servingv1.PhaseReady, servingv1.PhaseReady, created, created.Add(100*time.Second))
	// Ready again after a failure is not a time to Ready.
	m.observe(a, servingv1.PhaseReady, servingv1.PhaseFailed, created, created.Add(200*time.Second))
	m.observe(a, servingv1.PhaseFailed, servingv1.PhaseReady, created, created.Add(300*time.Second))

	phase := func(p servingv1.Phase) float64 { return testutil.ToFloat64(m.phase.WithLabelValues(string(p))) }
	if got := [4]float64{phase(servingv1.PhasePending), phase(servingv1.PhaseLoading), phase(servingv1.PhaseReady), phase(servingv1.PhaseFailed)}; got != [4]float64{1, 0, 1, 0} {
		t.Errorf("phase gauge Pending, Loading, Ready, Failed = %v, want [1 0 1 0]", got)
	}
	for _, tc := range []struct {
		from, to servingv1.Phase
		want     float64
	}{{"", servingv1.PhasePending, 2}, {servingv1.PhaseLoading, servingv1.PhaseReady, 1}, {servingv1.PhaseReady, servingv1.PhaseReady, 0}, {servingv1.PhaseFailed, servingv1.PhaseReady, 1}} {
		if got := testutil.ToFloat64(m.transitions.WithLabelValues(string(tc.from), string(tc.to))); got != tc.want {
			t.Errorf("transitions %q -> %q = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	if got := testutil.CollectAndCount(m.timeToReady); got != 1 {
		t.Fatalf("time to Ready has %d series", got)
	}
	var out dto.Metric
	if err := m.timeToReady.(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	if h := out.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() != 90 {
		t.Errorf("time to Ready observed %d times, sum %vs; want once, 90s", h.GetSampleCount(), h.GetSampleSum())
	}

	m.forget(a)
	m.forget(b)
	if phase(servingv1.PhaseReady) != 0 || phase(servingv1.PhasePending) != 0 {
		t.Errorf("deleted AIInferences still counted: Ready %v, Pending %v", phase(servingv1.PhaseReady), phase(servingv1.PhasePending))
	}
	// A second manager in the process shares the registered metrics.
	if NewMetrics(reg).phase != m.phase {
		t.Error("a second NewMetrics on one registry made new collectors")
	}
}
