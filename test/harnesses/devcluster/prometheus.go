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

// startPrometheus installs config/prometheus's objects (but the
// Operator's) and kube-prometheus's Prometheus account in the cluster,
// and starts binary (make run PROMETHEUS=1) with the scrape configuration
// the Operator would generate from the ServiceMonitor and the
// PrometheusRule's alerts, its data in dir/prometheus, and waits until it
// has scraped its targets. The caller stops it.
func startPrometheus(ctx context.Context, binary, root, dir string, c *cluster.Cluster, admin client.Client, metricsAddr string) (*prometheus.Server, error) {
	rendered, err := render.Render(filepath.Join(root, "config", "prometheus"))
	if err != nil {
		return nil, err
	}
	objs, err := prometheus.Split(rendered)
	if err != nil {
		return nil, fmt.Errorf("config/prometheus: %w", err)
	}
	if err := prometheus.InstallKubePrometheus(ctx, admin); err != nil {
		return nil, err
	}
	if err := prometheus.InstallObjects(ctx, admin, objs, []string{metricsAddr}); err != nil {
		return nil, err
	}
	promDir := filepath.Join(dir, "prometheus")
	if err := os.RemoveAll(promDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(promDir, 0o750); err != nil {
		return nil, err
	}
	rules, err := prometheus.RuleFile(objs.PrometheusRule)
	if err != nil {
		return nil, err
	}
	rulesPath := filepath.Join(promDir, "rules.yaml")
	if err := os.WriteFile(rulesPath, rules, 0o600); err != nil {
		return nil, err
	}
	cfg, err := prometheus.Configure(ctx, admin, c.Admin, objs, promDir, prometheusInterval, []string{rulesPath})
	if err != nil {
		return nil, err
	}
	s, err := prometheus.Start(ctx, binary, cfg, promDir)
	if err != nil {
		return nil, err
	}
	if err := waitPrometheusTargets(ctx, s); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// printPrometheus prints where make run's Prometheus answers: its HTTP
// API (built from its Go module, it has no web UI: that needs npm).
func printPrometheus(s *prometheus.Server) {
	fmt.Printf(`
Prometheus (make run PROMETHEUS=1), scraping modelgate with config/prometheus's
scraper token and evaluating its alerts; its API (no web UI) and log:

  curl -s %s/api/v1/alerts
  curl -s '%s/api/v1/query?query=modelgate_policies_loaded'
  %s
`, s.URL, s.URL, s.Log)
}
