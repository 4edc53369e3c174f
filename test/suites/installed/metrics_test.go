package installed_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// metricsReader is the service account the suite scrapes with, bound to
// the chart's modelgate-metrics-reader ClusterRole, as a Prometheus is.
const metricsReader = "metrics-reader"

// metricsToken binds the reader and returns a token of it.
func metricsToken(ctx context.Context) string {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: metricsReader}}
	if err := k8s.Create(ctx, sa); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "installed-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "modelgate-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	if err := k8s.Create(ctx, binding); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	cs, err := kubernetes.NewForConfig(gpuCluster.Developer)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// reviews scrapes each Pod's metrics at its own address, with token, and
// returns its modelgate_mutating_reviews_total, summed over labels, by
// Pod name. It scrapes as the shipped ServiceMonitor does: the metrics
// server's certificate (self-signed, unless metrics.certDir is set) is not
// checked; the token is what the server checks.
func reviews(ctx context.Context, pods []corev1.Pod, token string) map[string]float64 {
	GinkgoHelper()
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // as config/prometheus's ServiceMonitor (tlsConfig.insecureSkipVerify)
		MinVersion:         tls.VersionTLS12,
	}}}
	out := map[string]float64{}
	for _, p := range pods {
		url := "https://" + net.JoinHostPort(p.Status.PodIP, "8443") + "/metrics"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpc.Do(req)
		Expect(err).NotTo(HaveOccurred(), "scraping %s (pod %s)", url, p.Name)
		Expect(resp.StatusCode).To(Equal(http.StatusOK), "scraping %s", url)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(resp.Body)
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		var sum float64
		if f, ok := families["modelgate_mutating_reviews_total"]; ok {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
		out[p.Name] = sum
	}
	return out
}

// sampleWorkloads are config/samples' workloads (the Deployment, the Job
// and the Pod), in namespace ns; the Secret the Job's loader reads is
// created there.
func sampleWorkloads(ns string) []client.Object {
	GinkgoHelper()
	dir := filepath.Join(root, "config", "samples")
	read := func(file string, obj client.Object) client.Object {
		b, err := os.ReadFile(filepath.Join(dir, file))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(b, obj)).To(Succeed(), file)
		obj.SetNamespace(ns)
		return obj
	}
	secret := read("s3-credentials.yaml", &corev1.Secret{})
	Expect(k8s.Create(context.Background(), secret)).To(Succeed())
	return []client.Object{
		read("deployment.yaml", &appsv1.Deployment{}),
		read("job.yaml", &batchv1.Job{}),
		read("pod.yaml", &corev1.Pod{}),
	}
}

// netCIDR parses a CIDR.
func netCIDR(s string) (*net.IPNet, error) {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", s, err)
	}
	return n, nil
}

// ip parses an address.
func ip(s string) net.IP { return net.ParseIP(s) }
