package audit

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the audit's Prometheus metrics.
type Metrics struct {
	findings *prometheus.GaugeVec
	policy   *prometheus.GaugeVec
	passes   *prometheus.CounterVec
	duration prometheus.Gauge
	last     prometheus.Gauge
	audited  prometheus.Gauge
}

// NewMetrics registers the audit's metrics with reg; nil registers them
// nowhere.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "modelgate_audit_findings",
			Help: "Findings of the last audit pass, by result (fail, warn, error, skip: excepted) and category (WorkloadPolicy, Injection).",
		}, []string{"result", "category"}),
		policy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "modelgate_audit_policy_workloads",
			Help: "Workloads each policy fails, warns about, errs on, passes or is excepted for (skip) in the last audit pass (modelgate's own checks included).",
		}, []string{"policy", "result"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_audit_passes_total",
			Help: "Audit passes, by outcome: ok, or error (the pass stopped; see the logs).",
		}, []string{"outcome"}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modelgate_audit_pass_duration_seconds",
			Help: "How long the last audit pass took.",
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modelgate_audit_last_pass_timestamp_seconds",
			Help: "When the last audit pass that completed ended, as a Unix time.",
		}),
		audited: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "modelgate_audit_workloads",
			Help: "Workloads the last audit pass judged.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.findings, m.policy, m.passes, m.duration, m.last, m.audited)
	}
	// Both outcomes exist at 0, so that the first pass of either shows as
	// an increase (the audit's alert reads both).
	m.passes.WithLabelValues("ok")
	m.passes.WithLabelValues("error")
	return m
}

// passed records a completed pass.
func (m *Metrics) passed(outcomes []Outcome, took time.Duration, end time.Time) {
	m.passes.WithLabelValues("ok").Inc()
	m.duration.Set(took.Seconds())
	m.last.Set(float64(end.Unix()))
	counts := map[[2]string]int{}
	audited := 0
	for i := range outcomes {
		if outcomes[i].Skipped == "" {
			audited++
		}
		for _, f := range outcomes[i].Findings {
			counts[[2]string{string(f.Result), f.Category}]++
		}
	}
	m.audited.Set(float64(audited))
	m.findings.Reset()
	for _, r := range []Result{Fail, Warn, Error, Skip} {
		for _, c := range []string{CategoryPolicy, CategoryInjection} {
			m.findings.WithLabelValues(string(r), c).Set(float64(counts[[2]string{string(r), c}]))
		}
	}
	m.policy.Reset()
	for p, s := range PolicyCounts(outcomes) {
		m.policy.WithLabelValues(p, "fail").Set(float64(s.Fail))
		m.policy.WithLabelValues(p, "warn").Set(float64(s.Warn))
		m.policy.WithLabelValues(p, "error").Set(float64(s.Error))
		m.policy.WithLabelValues(p, "pass").Set(float64(s.Pass))
		m.policy.WithLabelValues(p, "skip").Set(float64(s.Skip))
	}
}

// failed records a pass that stopped.
func (m *Metrics) failed() { m.passes.WithLabelValues("error").Inc() }
