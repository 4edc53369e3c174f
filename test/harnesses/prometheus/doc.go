// Package prometheus runs a real Prometheus, built from its module into
// bin/, against the simulated cluster (test/harnesses/cluster), in the
// configuration the real Prometheus Operator, built from its module
// (hack/prometheus-operator) and run as a host process, generates from
// config/prometheus's ServiceMonitor and PrometheusRule, adjusted only in
// what a host process lacks beside the Operator's Pod (ForHost); and reads
// the dashboard's queries and the alerts' states through Prometheus's HTTP
// API. `make test-prometheus` runs the suite built on it
// (test/suites/prometheus); `make run PROMETHEUS=1` runs the same
// Prometheus and Operator beside the development cluster.
package prometheus
