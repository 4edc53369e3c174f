package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// make run serves modelgate's metrics as an install does: over HTTPS, to
// callers whose token may get /metrics (metrics.secure). A service account
// of its own is bound to the shipped ClusterRole modelgate-metrics-reader,
// as a Prometheus's would be, and the usage prints the command that
// scrapes with its token.
const (
	metricsReaderNamespace = "modelgate-system"
	metricsReaderName      = "metrics-reader"
	metricsReaderRole      = "modelgate-metrics-reader" // config/rbac/metrics_reader_role.yaml
)

// configureMetrics serves modelgate's metrics securely on addr.
func configureMetrics(cfg *config.Configuration, addr string) {
	secure := true
	cfg.Metrics.BindAddress = addr
	cfg.Metrics.Secure = &secure
}

// bindMetricsReader creates the service account that may read the metrics.
func bindMetricsReader(ctx context.Context, c client.Client) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metricsReaderNamespace, Name: metricsReaderName}}
	if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account %s/%s: %w", metricsReaderNamespace, metricsReaderName, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "modelgate-dev-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metricsReaderNamespace, Name: metricsReaderName}},
	}
	if err := c.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to %s: %w", metricsReaderName, metricsReaderRole, err)
	}
	return nil
}

// printMetrics prints how to scrape modelgate's metrics with the reader's
// token; k is the kubectl command line the usage gave.
func printMetrics(k, addr string) {
	fmt.Printf(`
modelgate's metrics, served as an install serves them (HTTPS, to tokens
allowed to get /metrics; docs/operations.md, "Metrics and alerts"):

  curl -sk -H "Authorization: Bearer $(%s -n %s create token %s)" https://%s/metrics | grep '^modelgate_'
`, k, metricsReaderNamespace, metricsReaderName, addr)
}
