package installed_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// The chart's monitoring objects, on: the metrics Service, the
// ServiceMonitor and the PrometheusRule (both named modelgate), scraped
// by kube-prometheus's Prometheus (monitoring/prometheus-k8s), the
// chart's default.
var monitoringValues = map[string]any{
	"service":        map[string]any{"enabled": true},
	"serviceMonitor": map[string]any{"enabled": true},
	"prometheusRule": map[string]any{"enabled": true},
}

// monitoringInterval is the Prometheus's scrape and evaluation interval.
const monitoringInterval = "2s"

// installOperator installs the Prometheus Operator (its CRDs, which the
// chart's ServiceMonitor and PrometheusRule need before helm installs
// them, its RBAC and the Operator itself) and kube-prometheus's
// Prometheus account, as kube-prometheus does before anything it
// monitors.
func installOperator(ctx context.Context, dir string) {
	GinkgoHelper()
	admin := adminClient()
	Expect(prometheus.InstallOperator(ctx, admin, *operatorBinary, root)).To(Succeed())
	op, err := prometheus.StartOperator(ctx, gpuCluster.Admin, *operatorBinary, dir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(op.Stop()).To(Succeed())
	})
	Expect(prometheus.InstallKubePrometheus(ctx, admin)).To(Succeed())
}

// startPrometheus has the Operator generate its Prometheus's configuration
// from the chart's ServiceMonitor and PrometheusRule and runs it in the
// project's Prometheus on this machine (adjusted by prometheus.ForHost:
// the mounted files' paths, and the interval), which reaches the Pods at
// their addresses over the node's bridge. It runs until stopPrometheus.
func startPrometheus(ctx context.Context) *prometheus.Server {
	GinkgoHelper()
	dir := filepath.Join(gpuCluster.LogDir, "..", "prometheus")
	Expect(os.MkdirAll(dir, 0o750)).To(Succeed())
	key := installNamespace + "/modelgate"
	cfg, err := prometheus.Configure(ctx, adminClient(), gpuCluster.Admin,
		prometheus.ConfigOptions{Binary: *prometheusBinary, Interval: monitoringInterval, Dir: dir}, []string{key}, []string{key})
	Expect(err).NotTo(HaveOccurred())
	for _, c := range cfg.Adjusted {
		AddReportEntry("the Operator's configuration, for a host process", c)
	}
	s, err := prometheus.Start(ctx, *prometheusBinary, cfg.Path, dir)
	Expect(err).NotTo(HaveOccurred())
	return s
}

// stopPrometheus stops s, if it runs, with its log's last lines when a
// spec failed.
func stopPrometheus(s *prometheus.Server) {
	if s == nil {
		return
	}
	if CurrentSpecReport().Failed() {
		AddReportEntry("prometheus's log", cluster.Tail(s.Log, 30))
	}
	_ = s.Stop()
}

// alertActive waits until the named alert is pending or firing.
func alertActive(ctx context.Context, s *prometheus.Server, name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		alerts, err := s.ActiveAlerts(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		names := []string{}
		for _, a := range alerts {
			names = append(names, a.Labels["alertname"]+"="+a.State)
			if a.Labels["alertname"] == name {
				return
			}
		}
		g.Expect(names).To(ContainElement(HavePrefix(name + "=")))
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
}
