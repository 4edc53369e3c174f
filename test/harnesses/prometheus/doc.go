// Package prometheus runs a real Prometheus, built from its module into
// bin/, against the simulated cluster (test/harnesses/cluster): the scrape
// configuration the Prometheus Operator generates from config/prometheus's
// ServiceMonitor, the PrometheusRule's groups as its rule file, and the
// dashboard's queries and the alerts' states read through its HTTP API.
// `make test-prometheus` runs the suite built on it (test/suites/prometheus);
// `make run PROMETHEUS=1` runs the same Prometheus beside the development
// cluster.
package prometheus
