package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// prometheusInterval is how often make run's Prometheus scrapes and
// evaluates the rules: often, so that a change shows within seconds.
const prometheusInterval = "5s"

// startPrometheus installs the Prometheus Operator (its CRDs and RBAC,
// from its module) and runs it (make run PROMETHEUS=1), installs
// kube-prometheus's Prometheus account and config/prometheus's objects in
// the cluster, and starts binary with the configuration the Operator
// generates from the ServiceMonitor and the PrometheusRule (adjusted to a
// host process: prometheus.ForHost), its data in dir/prometheus, and waits
// until it has scraped its targets. stop stops Prometheus and the
// Operator.
func startPrometheus(ctx context.Context, binary, operatorBinary, root, dir string, c *cluster.Cluster, admin client.Client, metricsAddr string) (s *prometheus.Server, stop func(), err error) {
	rendered, err := render.Render(filepath.Join(root, "config", "prometheus"))
	if err != nil {
		return nil, nil, err
	}
	objs, err := prometheus.Split(rendered)
	if err != nil {
		return nil, nil, fmt.Errorf("config/prometheus: %w", err)
	}
	promDir := filepath.Join(dir, "prometheus")
	if err := os.RemoveAll(promDir); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(promDir, 0o750); err != nil {
		return nil, nil, err
	}
	if err := prometheus.InstallOperator(ctx, admin, operatorBinary, root); err != nil {
		return nil, nil, err
	}
	op, err := prometheus.StartOperator(ctx, c.Admin, operatorBinary, promDir)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, op.Stop())
		}
	}()
	if err := prometheus.InstallKubePrometheus(ctx, admin); err != nil {
		return nil, nil, err
	}
	if err := prometheus.InstallObjects(ctx, admin, objs, []string{metricsAddr}); err != nil {
		return nil, nil, err
	}
	sm, pr := objs.ServiceMonitor, objs.PrometheusRule
	cfg, err := prometheus.Configure(ctx, admin, c.Admin, prometheus.ConfigOptions{Binary: binary, Interval: prometheusInterval, Dir: promDir},
		[]string{sm.Namespace + "/" + sm.Name}, []string{pr.Namespace + "/" + pr.Name})
	if err != nil {
		return nil, nil, err
	}
	s, err = prometheus.Start(ctx, binary, cfg.Path, promDir)
	if err != nil {
		return nil, nil, err
	}
	if err := waitPrometheusTargets(ctx, s); err != nil {
		return nil, nil, errors.Join(err, s.Stop())
	}
	return s, func() { _ = s.Stop(); _ = op.Stop() }, nil
}

// printPrometheus prints where make run's Prometheus answers: its HTTP
// API (built from its Go module, it has no web UI: that needs npm).
func printPrometheus(s *prometheus.Server) {
	fmt.Printf(`
Prometheus (make run PROMETHEUS=1), with the configuration the Prometheus
Operator generates from config/prometheus, scraping modelgate with its scraper
token and evaluating its alerts; its API (no web UI) and log:

  curl -s %s/api/v1/alerts
  curl -s '%s/api/v1/query?query=modelgate_policies_loaded'
  %s
`, s.URL, s.URL, s.Log)
}
