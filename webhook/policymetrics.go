package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/internal/promreg"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// Outcomes of a validating review, the values of its outcome label.
const (
	outcomeAllowed = "allowed" // every policy allowed it (dry runs included)
	outcomeWarned  = "warned"  // allowed, with warnings
	// outcomeRatcheted: an UPDATE allowed because every denial was the old
	// object's too (policies.Decision.Ratchet), with warnings saying so.
	outcomeRatcheted = "ratcheted"
	// outcomeExcepted: allowed because a WorkloadPolicyException lifted
	// every denial, with warnings naming it.
	outcomeExcepted = "excepted"
	outcomeDenied   = "denied" // a deny policy (or a failed one) denied it
)

// PolicyMetrics are the policy engine's and the validating webhook's
// Prometheus metrics. It implements policies.Observer.
type PolicyMetrics struct {
	reviews     *prometheus.CounterVec
	evaluations *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	loadErrors  *prometheus.CounterVec
}

var (
	_ policies.Observer     = (*PolicyMetrics)(nil)
	_ policies.LoadObserver = (*PolicyMetrics)(nil)
)

// NewPolicyMetrics creates the metrics and registers them with reg (nil
// registers nothing). The gauge modelgate_policies_loaded is registered
// with the engine, by Register.
func NewPolicyMetrics(reg prometheus.Registerer) *PolicyMetrics {
	m := &PolicyMetrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_validating_reviews_total",
			Help: "Validating admission reviews of workloads by kind, operation and outcome.",
		}, []string{"kind", "operation", "outcome"}),
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_policy_evaluations_total",
			Help: "Policy decisions by policy and decision (allow, deny, warn, dryrun, error), evaluated or given by the decision cache.",
		}, []string{"policy", "decision"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "modelgate_policy_evaluation_duration_seconds",
			Help: "Time to evaluate one policy for one review.",
			// 10 µs to about 0.33 s, doubling.
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 16),
		}, []string{"policy"}),
		loadErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_policy_load_errors_total",
			Help: "Policies that failed to load (parse, compile, settings), by source.",
		}, []string{"source"}),
	}
	if reg != nil {
		m.reviews = promreg.Register(reg, m.reviews)
		m.evaluations = promreg.Register(reg, m.evaluations)
		m.duration = promreg.Register(reg, m.duration)
		m.loadErrors = promreg.Register(reg, m.loadErrors)
	}
	// The series the alerts and the dashboard read exist at 0 from the
	// start, so that the first error or failed load shows as an increase.
	initErrors(m.reviews)
	for _, source := range []string{validators.SourceWorkloadPolicy, policies.SourceDirectory} {
		m.loadErrors.WithLabelValues(source)
	}
	return m
}

// policyDecisions are the values of the decision label.
var policyDecisions = []string{"allow", "deny", "warn", "dryrun", "error"}

// Loaded implements policies.LoadObserver: every decision of each policy
// put in force exists at 0, so that its first denial or error is seen.
func (m *PolicyMetrics) Loaded(names []string) {
	for _, name := range names {
		for _, d := range policyDecisions {
			m.evaluations.WithLabelValues(name, d)
		}
	}
}

// Evaluated implements policies.Observer.
func (m *PolicyMetrics) Evaluated(policy, decision string, d time.Duration) {
	m.evaluations.WithLabelValues(policy, decision).Inc()
	m.duration.WithLabelValues(policy).Observe(d.Seconds())
}

// Cached implements policies.Observer: a result the decision cache gave
// counts as a decision, and takes no evaluation time.
func (m *PolicyMetrics) Cached(policy, decision string) {
	m.evaluations.WithLabelValues(policy, decision).Inc()
}

// LoadFailed counts a policy of the source that failed to load.
func (m *PolicyMetrics) LoadFailed(source string) {
	m.loadErrors.WithLabelValues(source).Inc()
}

func (m *PolicyMetrics) review(kind, op, outcome string) {
	m.reviews.WithLabelValues(kindLabel(kind), operationLabel(op), outcome).Inc()
}
