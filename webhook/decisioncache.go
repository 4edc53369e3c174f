package webhook

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
)

// newDecisionCache is the validating webhook's decision cache as the
// Configuration sizes it, nil when policy.decisionCache.maxBytes is 0. Its
// metrics report the first one made in the process: a replica makes one;
// the tests start more managers in one process, and the first is the
// suite's own (as with modelgate_policies_loaded).
func newDecisionCache(cfg *config.Configuration) *policies.DecisionCache {
	maxBytes := int64(config.DefaultDecisionCacheBytes)
	if q := cfg.Policy.DecisionCache.MaxBytes; q != nil {
		maxBytes = q.Value()
	}
	if maxBytes <= 0 {
		return nil
	}
	c := policies.NewDecisionCache(maxBytes)
	servedCache.CompareAndSwap(nil, c)
	cacheCollectorOnce.Do(func() { defaultRegistry.MustRegister(decisionCacheCollector{}) })
	return c
}

var (
	servedCache        atomic.Pointer[policies.DecisionCache]
	cacheCollectorOnce sync.Once
)

// decisionCacheCollector reports the served decision cache's counters and
// size at each scrape.
type decisionCacheCollector struct{}

var (
	cacheHitsDesc = prometheus.NewDesc("modelgate_policy_decision_cache_hits_total",
		"Validating reviews answered from the decision cache, without evaluating.", nil, nil)
	cacheRecalledDesc = prometheus.NewDesc("modelgate_policy_decision_cache_recalled_total",
		"Of the hits, the validating reviews answered from the request's bytes, before the object was decoded.", nil, nil)
	cacheMissesDesc = prometheus.NewDesc("modelgate_policy_decision_cache_misses_total",
		"Validating reviews the decision cache could have answered but had no decision for, so they were evaluated.", nil, nil)
	cacheEvictionsDesc = prometheus.NewDesc("modelgate_policy_decision_cache_evictions_total",
		"Decisions dropped from the decision cache to stay within policy.decisionCache.maxBytes.", nil, nil)
	cacheBytesDesc = prometheus.NewDesc("modelgate_policy_decision_cache_bytes",
		"Estimated memory the decision cache holds.", nil, nil)
	cacheMaxBytesDesc = prometheus.NewDesc("modelgate_policy_decision_cache_max_bytes",
		"The decision cache's bound, policy.decisionCache.maxBytes.", nil, nil)
	cacheEntriesDesc = prometheus.NewDesc("modelgate_policy_decision_cache_entries",
		"Entries in the decision cache.", nil, nil)
)

// Describe implements prometheus.Collector.
func (decisionCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheHitsDesc, cacheRecalledDesc, cacheMissesDesc, cacheEvictionsDesc, cacheBytesDesc, cacheMaxBytesDesc, cacheEntriesDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (decisionCacheCollector) Collect(ch chan<- prometheus.Metric) {
	c := servedCache.Load()
	if c == nil {
		return
	}
	st := c.Stats()
	for _, m := range []struct {
		desc *prometheus.Desc
		typ  prometheus.ValueType
		v    float64
	}{
		{cacheHitsDesc, prometheus.CounterValue, float64(st.Hits)},
		{cacheRecalledDesc, prometheus.CounterValue, float64(st.Recalled)},
		{cacheMissesDesc, prometheus.CounterValue, float64(st.Misses)},
		{cacheEvictionsDesc, prometheus.CounterValue, float64(st.Evictions)},
		{cacheBytesDesc, prometheus.GaugeValue, float64(st.Bytes)},
		{cacheMaxBytesDesc, prometheus.GaugeValue, float64(st.MaxBytes)},
		{cacheEntriesDesc, prometheus.GaugeValue, float64(st.Entries)},
	} {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.v)
	}
}
