package prometheus

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The Prometheus kube-prometheus installs: its namespace and service
// account, the subject of config/prometheus's discovery RoleBinding.
const (
	KubePrometheusNamespace      = "monitoring"
	KubePrometheusServiceAccount = "prometheus-k8s"
)

// testNet is TEST-NET-1 (192.0.2.0/24, never routed): the Endpoints
// publish modelgate's replicas there, and the Prometheus resource's
// default scrape class turns each back into loopback (prometheusYAML).
const testNet = "192.0.2."

// kubePrometheusYAML is what kube-prometheus gives its Prometheus: a
// service account and a ClusterRole to read nodes' and API servers'
// metrics; it may discover only in its own namespaces (none here).
const kubePrometheusYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: ` + KubePrometheusNamespace + `
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: ` + KubePrometheusServiceAccount + `
  namespace: ` + KubePrometheusNamespace + `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: prometheus-k8s
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- nonResourceURLs: [/metrics, /metrics/slis]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: prometheus-k8s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: prometheus-k8s
subjects:
- kind: ServiceAccount
  name: ` + KubePrometheusServiceAccount + `
  namespace: ` + KubePrometheusNamespace + `
`

// InstallKubePrometheus creates kube-prometheus's Prometheus account and
// its cluster-wide permissions.
func InstallKubePrometheus(ctx context.Context, c client.Client) error {
	for doc := range strings.SplitSeq(kubePrometheusYAML, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return err
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// InstallObjects creates o.Others and o.Monitoring (the Operator's CRDs
// first: InstallOperator), and publishes the replicas' metrics addresses
// (host:port on loopback) as the Endpoints of the metrics Service, at
// TEST-NET-1 addresses: modelgate runs as processes here, not Pods, so the
// Service selects nothing, and the API server refuses loopback addresses
// in Endpoints.
func InstallObjects(ctx context.Context, c client.Client, o *Objects, metricsAddrs []string) error {
	service := ""
	for _, u := range slices.Concat(o.Others, o.Monitoring) {
		u = u.DeepCopy()
		if u.GetKind() == "Service" {
			unstructured.RemoveNestedField(u.Object, "spec", "selector")
			service = u.GetName()
		}
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	if service == "" {
		return fmt.Errorf("config/prometheus has no Service")
	}
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: o.ServiceMonitor.Namespace}} //nolint:staticcheck // what the Operator's default discovery (endpoints) reads
	for i, addr := range metricsAddrs {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("metrics address %q: %w", addr, err)
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			return fmt.Errorf("metrics address %q: %w", addr, err)
		}
		ep.Subsets = append(ep.Subsets, corev1.EndpointSubset{ //nolint:staticcheck // as above
			Addresses: []corev1.EndpointAddress{{IP: testNet + strconv.Itoa(i+10)}},
			Ports:     []corev1.EndpointPort{{Name: "metrics", Port: int32(p), Protocol: corev1.ProtocolTCP}},
		})
	}
	return c.Create(ctx, ep)
}
