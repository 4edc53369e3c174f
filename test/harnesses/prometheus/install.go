package prometheus

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
// publish modelgate's replicas there, and JobOptions.Loopback turns each
// back into loopback.
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

// InstallObjects creates o.Others, and publishes the replicas' metrics
// addresses (host:port on loopback) as the Endpoints of the metrics
// Service, at TEST-NET-1 addresses: modelgate runs as processes here, not
// Pods, so the Service selects nothing, and the API server refuses
// loopback addresses in Endpoints.
func InstallObjects(ctx context.Context, c client.Client, o *Objects, metricsAddrs []string) error {
	service := ""
	for _, u := range o.Others {
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

// Configure writes, in dir, the configuration of a Prometheus that
// scrapes every interval what the Operator would have it scrape for
// o.ServiceMonitor (with the token the scraper's Secret holds once the
// token controller fills it), and the API server's metrics, as
// kube-prometheus's Prometheus account, evaluating the rule files. It
// returns the configuration's path.
func Configure(ctx context.Context, c client.Client, admin *rest.Config, o *Objects, dir, interval string, ruleFiles []string) (string, error) {
	k8s, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return "", err
	}
	tr, err := k8s.CoreV1().ServiceAccounts(KubePrometheusNamespace).CreateToken(ctx, KubePrometheusServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for %s/%s: %w", KubePrometheusNamespace, KubePrometheusServiceAccount, err)
	}
	api := APIServer{URL: admin.Host, CAFile: filepath.Join(dir, "ca.crt"), TokenFile: filepath.Join(dir, "prometheus.token")}
	if err := os.WriteFile(api.CAFile, admin.CAData, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(api.TokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	sm := o.ServiceMonitor
	secret := func(sel corev1.SecretKeySelector) (string, error) {
		var v string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			s := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: sm.Namespace, Name: sel.Name}, s); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			v = string(s.Data[sel.Key])
			return v != "", nil
		})
		if err != nil {
			return "", fmt.Errorf("secret %s/%s has no %s: %w", sm.Namespace, sel.Name, sel.Key, err)
		}
		return v, nil
	}
	jobs, err := ServiceMonitorJobs(sm, api, secret, JobOptions{ScrapeInterval: interval, Loopback: true})
	if err != nil {
		return "", err
	}
	host, err := url.Parse(admin.Host)
	if err != nil {
		return "", err
	}
	jobs = append(jobs, StaticJob("apiserver", api, interval, host.Host))
	path := filepath.Join(dir, "prometheus.yml")
	return path, WriteConfig(path, interval, ruleFiles, jobs)
}
