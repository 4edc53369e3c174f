package webhook

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/modelgate/modelgate/policies"
)

// exceptionCollector serves the WorkloadPolicyExceptions' metrics from
// the engine's snapshot, computed at each scrape against the clock: an
// exception leaves them the moment it expires.
type exceptionCollector struct {
	engine *policies.Engine
	now    func() time.Time
}

var (
	// The exception's namespace is exception_namespace: a scraper's
	// target label namespace (modelgate's own) would shadow a label
	// namespace, renamed exported_namespace.
	exceptionsInForceDesc = prometheus.NewDesc("modelgate_policy_exceptions_in_force",
		"WorkloadPolicyExceptions in force now (not expired), by their namespace.", []string{"exception_namespace"}, nil)
	exceptionExpiryDesc = prometheus.NewDesc("modelgate_policy_exception_expiry_timestamp_seconds",
		"When each WorkloadPolicyException in force expires (its spec.expiresAt), as seconds since the epoch.",
		[]string{"exception_namespace", "name", "ticket"}, nil)
)

// Describe implements prometheus.Collector.
func (c *exceptionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- exceptionsInForceDesc
	ch <- exceptionExpiryDesc
}

// Collect implements prometheus.Collector.
func (c *exceptionCollector) Collect(ch chan<- prometheus.Metric) {
	x, now := c.engine.Exceptions(), c.now()
	byNS := map[string]int{}
	for _, e := range x.All() {
		if !x.InForce(e, now) {
			continue
		}
		byNS[e.Namespace]++
		ch <- prometheus.MustNewConstMetric(exceptionExpiryDesc, prometheus.GaugeValue,
			float64(e.ExpiresAt.Unix()), e.Namespace, e.Name, e.Ticket)
	}
	for ns, n := range byNS {
		ch <- prometheus.MustNewConstMetric(exceptionsInForceDesc, prometheus.GaugeValue, float64(n), ns)
	}
}
