package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/modelgate/modelgate/internal/promreg"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// Outcomes of a mutating review, the values of the outcome metric label.
const (
	outcomeInjected   = "injected"    // patched
	outcomeReverted   = "reverted"    // opted out: what modelgate injected taken out
	outcomeUnchanged  = "unchanged"   // opted in, nothing left to change
	outcomeSkipped    = "skipped"     // not opted in, or an excluded namespace
	outcomeInvalid    = "invalid"     // malformed annotations
	outcomeForbidden  = "forbidden"   // reserved metadata set or changed by hand
	outcomeForged     = "forged"      // unsealed reserved metadata taken off a controller's object
	outcomeBadRequest = "bad_request" // undecodable object
	outcomeError      = "error"       // modelgate's own fault
)

// Metrics are the mutating webhook's Prometheus metrics.
type Metrics struct {
	reviews *prometheus.CounterVec
	changes *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil registers
// nothing, for tests and benchmarks).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_mutating_reviews_total",
			Help: "Mutating admission reviews by kind, operation and outcome.",
		}, []string{"kind", "operation", "outcome"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_mutator_changes_total",
			Help: "Objects changed, by mutator and kind.",
		}, []string{"mutator", "kind"}),
	}
	if reg != nil {
		m.reviews = promreg.Register(reg, m.reviews)
		m.changes = promreg.Register(reg, m.changes)
	}
	initErrors(m.reviews)
	return m
}

// initErrors makes the series of a reviews counter that the alert on
// modelgate's own faults reads (outcome="error", every kind the webhooks
// serve, CREATE and UPDATE) exist at 0 from the start: a series born at its
// first error shows no increase, and the alert would miss that error.
func initErrors(reviews *prometheus.CounterVec) {
	for kind := range metricKinds {
		for _, op := range []string{"CREATE", "UPDATE"} {
			reviews.WithLabelValues(kind, op, outcomeError)
		}
	}
}

// defaultRegistry is controller-runtime's registry, served on the metrics
// endpoint next to its webhook latency histograms.
var defaultRegistry prometheus.Registerer = crmetrics.Registry

func (m *Metrics) review(kind, op, outcome string) {
	m.reviews.WithLabelValues(kindLabel(kind), operationLabel(op), outcome).Inc()
}

func (m *Metrics) changed(kind string, mutators []string) {
	for _, name := range mutators {
		m.changes.WithLabelValues(name, kindLabel(kind)).Inc()
	}
}

// labelOther is the label value of a kind or operation modelgate's
// webhooks are not registered for.
const labelOther = "other"

// metricKinds are the kinds modelgate's webhooks are registered for. The
// kind and operation of a review are whatever its sender wrote, and the
// webhook port is reachable by more than the API server: a label value
// outside a known set would let any caller grow the metrics (and the
// process's memory) without bound, one series per made-up value.
var metricKinds = func() map[string]bool {
	kinds := map[string]bool{validators.AIInferenceKind: true, workloadPolicyKind.Kind: true}
	for gvk := range decode.Whole {
		kinds[gvk.Kind] = true
	}
	for gvk := range claimDecoders {
		kinds[gvk.Kind] = true
	}
	return kinds
}()

// kindLabel is kind when modelgate's webhooks handle it, else "other".
func kindLabel(kind string) string {
	if metricKinds[kind] {
		return kind
	}
	return labelOther
}

// operationLabel is the admission operation, or "other" for a value that
// is not one.
func operationLabel(op string) string {
	switch op {
	case "CREATE", "UPDATE", "DELETE", "CONNECT":
		return op
	}
	return labelOther
}
