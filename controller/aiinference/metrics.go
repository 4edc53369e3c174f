package aiinference

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/internal/promreg"
)

// Phases are the phases modelgate_aiinference_phase reports, each with a
// series even at zero.
var Phases = []servingv1.Phase{servingv1.PhasePending, servingv1.PhaseLoading, servingv1.PhaseReady, servingv1.PhaseFailed}

// Metrics are the controller's Prometheus metrics. Only the replica that
// holds the lease reconciles, so only it reports them; the others report
// zero AIInferences.
type Metrics struct {
	mu     sync.Mutex
	phases map[types.NamespacedName]servingv1.Phase
	ready  map[types.NamespacedName]bool

	phase       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	timeToReady prometheus.Histogram
}

// NewMetrics registers the controller's metrics with reg. A metric
// already registered (a second manager in one process, in tests) is
// shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		phases: map[types.NamespacedName]servingv1.Phase{},
		ready:  map[types.NamespacedName]bool{},
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "modelgate_aiinference_phase",
			Help: "AIInferences in each phase, as this replica's controller last saw them.",
		}, []string{"phase"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelgate_aiinference_phase_transitions_total",
			Help: "Phase changes the controller wrote into AIInference status, by the phase left (empty for a new AIInference) and the phase entered.",
		}, []string{"from", "to"}),
		timeToReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "modelgate_aiinference_time_to_ready_seconds",
			Help: "Seconds from an AIInference's creation to its first Ready phase (a model load included).",
			// A small model on a warm node is ready in seconds; a large one
			// pulled from object storage takes tens of minutes.
			Buckets: []float64{5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600},
		}),
	}
	m.phase = promreg.Register(reg, m.phase)
	m.transitions = promreg.Register(reg, m.transitions)
	m.timeToReady = promreg.Register(reg, m.timeToReady)
	for _, p := range Phases {
		m.phase.WithLabelValues(string(p))
	}
	return m
}

// observe records the phase an AIInference's status moves to. created is
// its creation time; the first Ready after a Pending or Loading phase is
// observed as its time to Ready.
func (m *Metrics) observe(key types.NamespacedName, from, to servingv1.Phase, created, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leave(key)
	m.phases[key] = to
	m.phase.WithLabelValues(string(to)).Inc()
	if from == to {
		return
	}
	m.transitions.WithLabelValues(string(from), string(to)).Inc()
	if to == servingv1.PhaseReady && !m.ready[key] && (from == "" || from == servingv1.PhasePending || from == servingv1.PhaseLoading) {
		m.ready[key] = true
		m.timeToReady.Observe(now.Sub(created).Seconds())
	}
}

// forget drops an AIInference that is gone.
func (m *Metrics) forget(key types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leave(key)
	delete(m.phases, key)
	delete(m.ready, key)
}

// leave takes an AIInference out of the count of its last phase. The
// caller holds m.mu.
func (m *Metrics) leave(key types.NamespacedName) {
	if old, ok := m.phases[key]; ok {
		m.phase.WithLabelValues(string(old)).Dec()
	}
}
