//go:build tools

// Package prometheusoperator records the command this module builds: the
// Prometheus Operator, which test/harnesses/prometheus runs against the
// simulated cluster to turn config/prometheus's ServiceMonitor and
// PrometheusRule into a Prometheus configuration. It is separate from the
// main module so that the Operator's dependencies (a newer Prometheus among
// them) never enter modelgate's own graph.
package prometheusoperator

import (
	_ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
)
