package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// helmBinary is the helm `make helm-lint` builds; the chart's tests skip
// without it (make test runs them through make helm-lint).
func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("MODELGATE_HELM")
	if h == "" {
		t.Skip("MODELGATE_HELM is not set: make helm-lint runs the chart's tests with its pinned helm")
	}
	return h
}

// helmTemplate renders charts/modelgate in the namespace with the --set
// values, and returns its objects, or helm's error output.
func helmTemplate(t *testing.T, namespace string, set ...string) ([]*unstructured.Unstructured, error) {
	t.Helper()
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "modelgate", filepath.Join(root, "charts/modelgate"), "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			t.Fatalf("helm template output: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func mustHelmTemplate(t *testing.T, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := helmTemplate(t, namespace, set...)
	if err != nil {
		t.Fatalf("helm template %v: %v", set, err)
	}
	return objs
}

// helmOnly are what the chart adds to the kustomize installs' objects.
var (
	helmLabels    = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/part-of"}
	configMapHash = regexp.MustCompile(`^(modelgate-config)-[a-z0-9]{10}$`)
)

// comparable returns the objects by kind/name, without what only one of
// Helm and kustomize adds: Helm's labels and the pod template's checksum,
// kustomize's ConfigMap name hash, empty label and annotation maps, and
// the Configuration file as text (comments, order) rather than content.
func comparable(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, u := range objs {
		u = u.DeepCopy()
		if u.GetKind() == "Namespace" {
			continue // Helm leaves the release's namespace to the user
		}
		if m := configMapHash.FindStringSubmatch(u.GetName()); m != nil {
			u.SetName(m[1])
		}
		l := u.GetLabels()
		for _, k := range helmLabels {
			delete(l, k)
		}
		u.SetLabels(l)
		if len(l) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		}
		if len(u.GetAnnotations()) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
		}
		switch u.GetKind() {
		case "Deployment":
			unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations", "checksum/configuration")
			if a, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "metadata", "annotations"); len(a) == 0 {
				unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations")
			}
			vols, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "volumes")
			for _, v := range vols {
				if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
					if m := configMapHash.FindStringSubmatch(cm["name"].(string)); m != nil {
						cm["name"] = m[1]
					}
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, vols, "spec", "template", "spec", "volumes")
		case "ConfigMap":
			if text, ok, _ := unstructured.NestedString(u.Object, "data", "configuration.yaml"); ok {
				var cfg map[string]any
				if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
					t.Fatalf("ConfigMap %s: %v", u.GetName(), err)
				}
				_ = unstructured.SetNestedField(u.Object, cfg, "data", "configuration.yaml")
			}
		}
		out[u.GetKind()+"/"+u.GetName()] = u.Object
	}
	return out
}

// TestHelmChartIsTheKustomizeInstall: with its default values the chart
// renders config/default's objects, and with certificates.mode self
// config/self-managed's, but for what only Helm or kustomize adds. So the
// least-privilege, selector and CA injection checks the kustomize installs
// pass hold for the chart too.
func TestHelmChartIsTheKustomizeInstall(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir string
		set []string
	}{
		{defaultInstall, nil},
		{selfManagedInstall, []string{"certificates.mode=self"}},
		{"config/backstop", []string{"configuration.policy.backstop=true"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			want, err := render.Render(filepath.Join(root, tc.dir))
			if err != nil {
				t.Fatal(err)
			}
			got := mustHelmTemplate(t, env.Namespace, tc.set...)
			if diff := cmp.Diff(comparable(t, want), comparable(t, got)); diff != "" {
				t.Errorf("chart with %v differs from %s (-kustomize +helm); run make manifests, or change the chart's templates:\n%s", tc.set, tc.dir, diff)
			}
			if _, err := env.DecodeStrict(got); err != nil {
				t.Errorf("chart with %v: %v", tc.set, err)
			}
		})
	}
}

// TestHelmChartValues renders the chart with the values users change and
// checks each reaches its object.
func TestHelmChartValues(t *testing.T) {
	t.Run("another namespace", func(t *testing.T) {
		objs := mustHelmTemplate(t, "gpu-platform", "certificates.mode=self")
		y, err := yaml.Marshal(objs)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(y, []byte(env.Namespace)) {
			t.Errorf("the render in namespace gpu-platform names %s", env.Namespace)
		}
		if !bytes.Contains(y, []byte("namespace: gpu-platform")) {
			t.Error("the render in namespace gpu-platform has no object in it")
		}
		for _, u := range objs {
			if u.GetKind() != "ValidatingAdmissionPolicy" {
				continue
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchConditions")
			for _, c := range conds {
				expr := strings.Join(strings.Fields(c.(map[string]any)["expression"].(string)), " ")
				if want := "'system:serviceaccount:' + 'gpu-platform' + ':' + 'modelgate'"; !strings.Contains(expr, want) {
					t.Errorf("ValidatingAdmissionPolicy condition %q does not name %s", expr, want)
				}
			}
		}
	})
	t.Run("backstop", func(t *testing.T) {
		// configuration.policy.backstop is the one switch: the Configuration
		// modelgate reads, and the webhooks that fail open with it. Every
		// other webhook fails closed either way.
		for _, on := range []bool{false, true} {
			objs := mustHelmTemplate(t, env.Namespace, fmt.Sprintf("configuration.policy.backstop=%t", on))
			failOpen := 0
			for _, u := range objs {
				switch u.GetKind() {
				case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
				case "ConfigMap":
					if u.GetName() == "modelgate-config" {
						data, _, _ := unstructured.NestedString(u.Object, "data", "configuration.yaml")
						var cfg config.Configuration
						if err := yaml.UnmarshalStrict([]byte(data), &cfg); err != nil {
							t.Fatalf("the Configuration: %v", err)
						}
						if got := cfg.Policy.Backstop != nil && *cfg.Policy.Backstop; got != on {
							t.Errorf("backstop %t: the Configuration has policy.backstop %t", on, got)
						}
					}
					continue
				default:
					continue
				}
				hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
				for _, h := range hooks {
					m := h.(map[string]any)
					want := "Fail"
					if on && slices.Contains(webhook.FailOpenWithBackstop, m["name"].(string)) {
						want = "Ignore"
						failOpen++
					}
					if m["failurePolicy"] != want {
						t.Errorf("backstop %t: webhook %s has failurePolicy %v, want %s", on, m["name"], m["failurePolicy"], want)
					}
				}
			}
			if on && failOpen != len(webhook.FailOpenWithBackstop) {
				t.Errorf("backstop: %d webhooks fail open, want %d (%v)", failOpen, len(webhook.FailOpenWithBackstop), webhook.FailOpenWithBackstop)
			}
		}
	})
	t.Run("files mode needs a CA bundle", func(t *testing.T) {
		_, err := helmTemplate(t, env.Namespace, "certificates.mode=files")
		if err == nil || !strings.Contains(err.Error(), "certificates.files.caBundle: required") {
			t.Errorf("err = %v, want certificates.files.caBundle: required", err)
		}
		_, err = helmTemplate(t, env.Namespace, "certificates.mode=selfmanaged")
		if err == nil || !strings.Contains(err.Error(), `certificates.mode "selfmanaged": must be one of cert-manager, self, files`) {
			t.Errorf("err = %v, want the accepted modes", err)
		}
	})
	t.Run("files mode", func(t *testing.T) {
		objs := mustHelmTemplate(t, env.Namespace, "certificates.mode=files", "certificates.files.caBundle=Q0E=",
			"certificates.files.secretName=my-tls")
		n := 0
		for _, u := range objs {
			switch u.GetKind() {
			case "Certificate", "Issuer", "ValidatingAdmissionPolicy":
				t.Errorf("files mode renders %s/%s", u.GetKind(), u.GetName())
			}
			if _, ok := u.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
				t.Errorf("files mode: %s/%s asks cert-manager for the CA", u.GetKind(), u.GetName())
			}
			eachClientConfig(u.Object, func(cc map[string]any) {
				n++
				if cc["caBundle"] != "Q0E=" {
					t.Errorf("%s/%s: clientConfig caBundle = %v, want the value", u.GetKind(), u.GetName(), cc["caBundle"])
				}
			})
		}
		if n < 3 {
			t.Errorf("%d clientConfigs, want the mutating, validating and conversion webhooks'", n)
		}
		decodedObjs, err := env.DecodeStrict(objs)
		if err != nil {
			t.Fatal(err)
		}
		if got := servingSecret(t, decodedObjs); got != "my-tls" {
			t.Errorf("serving certificate from Secret %q, want my-tls", got)
		}
		if got := installConfiguration(t, decodedObjs).Certificates.Mode; got != config.CertificatesFiles {
			t.Errorf("certificates.mode = %s, want files", got)
		}
	})
	t.Run("deployment and configuration", func(t *testing.T) {
		objs := mustHelmTemplate(t, env.Namespace, "replicas=3", "image.digest=sha256:0123", "resources.limits.memory=1Gi",
			"topologySpread=false", "podDisruptionBudget.enabled=false", "networkPolicy.enabled=false",
			"configuration.injection.excludedNamespaces={kube-system,batch}", "configuration.policy.evaluationTimeout=1s")
		decodedObjs, err := env.DecodeStrict(objs)
		if err != nil {
			t.Fatal(err)
		}
		d := only[*appsv1.Deployment](t, decodedObjs)
		if got := *d.Spec.Replicas; got != 3 {
			t.Errorf("replicas = %d, want 3", got)
		}
		c := modelgateContainer(t, d)
		if c.Image != "ghcr.io/modelgate/modelgate@sha256:0123" {
			t.Errorf("image = %s, want the digest", c.Image)
		}
		if got := c.Resources.Limits.Memory().String(); got != "1Gi" {
			t.Errorf("memory limit = %s, want 1Gi", got)
		}
		if d.Spec.Template.Spec.TopologySpreadConstraints != nil || d.Spec.Template.Spec.Affinity != nil {
			t.Error("topologySpread=false still spreads the pods")
		}
		for _, u := range objs {
			if k := u.GetKind(); k == "PodDisruptionBudget" || k == "NetworkPolicy" {
				t.Errorf("%s rendered while turned off", k)
			}
		}
		cfg := installConfiguration(t, decodedObjs) // strictly parsed, defaulted, validated
		if diff := cmp.Diff([]string{"kube-system", "batch"}, cfg.Injection.ExcludedNamespaces); diff != "" {
			t.Errorf("excludedNamespaces (-want +got):\n%s", diff)
		}
		if got := cfg.Policy.EvaluationTimeout.Duration.String(); got != "1s" {
			t.Errorf("evaluationTimeout = %s, want 1s", got)
		}
		if cfg.Certificates.Mode != config.CertificatesCertManager || cfg.Namespace != env.Namespace {
			t.Errorf("certificates.mode %s, namespace %s: want cert-manager and %s", cfg.Certificates.Mode, cfg.Namespace, env.Namespace)
		}
		var checksum string
		for _, u := range mustHelmTemplate(t, env.Namespace) {
			if u.GetKind() == "Deployment" {
				checksum, _, _ = unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", "checksum/configuration")
			}
		}
		if checksum == "" || checksum == d.Spec.Template.Annotations["checksum/configuration"] {
			t.Errorf("checksum/configuration %q does not change with the Configuration", checksum)
		}
	})
	t.Run("metrics, the policy library and the PolicyReport CRD", func(t *testing.T) {
		root, err := env.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		objs := mustHelmTemplate(t, env.Namespace, "metrics.service.enabled=true", "metrics.serviceMonitor.enabled=true",
			"metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true", "policyLibrary.enabled=true",
			"policyReports.installCRD=true")
		got := comparable(t, objs)
		for _, dir := range []string{"config/prometheus", "config/samples/policies", "config/policyreport"} {
			want, err := render.Render(filepath.Join(root, dir))
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range comparable(t, want) {
				if diff := cmp.Diff(w, got[k]); diff != "" {
					t.Errorf("%s: %s (-kustomize +helm):\n%s", dir, k, diff)
				}
			}
		}
		off := comparable(t, mustHelmTemplate(t, env.Namespace))
		for _, k := range []string{"ServiceMonitor/modelgate", "PrometheusRule/modelgate", "ConfigMap/modelgate-dashboard", "WorkloadPolicy/required-owner-team",
			"CustomResourceDefinition/policyreports.wgpolicyk8s.io", "ServiceAccount/modelgate-metrics-scraper", "Secret/modelgate-metrics-scraper-token",
			"ClusterRoleBinding/modelgate-metrics-reader-scraper", "RoleBinding/modelgate-prometheus-discovery"} {
			if _, ok := got[k]; !ok {
				t.Errorf("%s not rendered when turned on", k)
			}
			if _, ok := off[k]; ok {
				t.Errorf("%s rendered by default", k)
			}
		}
	})
}

// TestHelmChartPrometheusValues: the ServiceMonitor's and the
// PrometheusRule's extra labels (kube-prometheus-stack selects by its
// release) and the Prometheus service account the discovery RoleBinding
// names reach their objects; the scraper's account, token and binding
// follow the release's namespace.
func TestHelmChartPrometheusValues(t *testing.T) {
	const ns = "gpu-platform"
	stack := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "kps-kube-prometheus-stack-prometheus", Namespace: "observability"}
	objs := mustHelmTemplate(t, ns, "metrics.service.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true",
		"metrics.serviceMonitor.labels.release=kps", "metrics.prometheusRule.labels.release=kps", "metrics.prometheusRule.labels.team=ml",
		"metrics.serviceMonitor.prometheusServiceAccount.name="+stack.Name, "metrics.serviceMonitor.prometheusServiceAccount.namespace="+stack.Namespace)
	seen := map[string]bool{}
	for _, u := range objs {
		k := u.GetKind() + "/" + u.GetName()
		seen[k] = true
		switch k {
		case "ServiceMonitor/modelgate", "PrometheusRule/modelgate":
			l := u.GetLabels()
			if l["release"] != "kps" || l["app.kubernetes.io/name"] != "modelgate" || l["app.kubernetes.io/instance"] != "modelgate" {
				t.Errorf("%s labels %v: want release: kps beside its own and Helm's", k, l)
			}
			if team := l["team"]; (team == "ml") != (u.GetKind() == "PrometheusRule") {
				t.Errorf("%s labels %v: team: ml is the PrometheusRule's only", k, l)
			}
			if u.GetKind() == "ServiceMonitor" {
				var sm monitoringv1.ServiceMonitor
				strict(t, u, &sm)
				if a := sm.Spec.Endpoints[0].Authorization; a == nil || a.Credentials == nil || a.Credentials.Name != "modelgate-metrics-scraper-token" {
					t.Errorf("ServiceMonitor authorization %+v: want the scraper's token Secret", a)
				}
			}
		case "RoleBinding/modelgate-prometheus-discovery":
			var rb rbacv1.RoleBinding
			strict(t, u, &rb)
			if want := []rbacv1.Subject{stack}; !slices.Equal(rb.Subjects, want) || rb.Namespace != ns {
				t.Errorf("%s in %s subjects %v, want %v in %s", k, rb.Namespace, rb.Subjects, want, ns)
			}
		case "ClusterRoleBinding/modelgate-metrics-reader-scraper":
			var crb rbacv1.ClusterRoleBinding
			strict(t, u, &crb)
			if want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "modelgate-metrics-scraper", Namespace: ns}}; !slices.Equal(crb.Subjects, want) {
				t.Errorf("%s subjects %v, want %v", k, crb.Subjects, want)
			}
		case "Secret/modelgate-metrics-scraper-token":
			var s corev1.Secret
			strict(t, u, &s)
			if s.Namespace != ns || s.Type != corev1.SecretTypeServiceAccountToken || s.Annotations[corev1.ServiceAccountNameKey] != "modelgate-metrics-scraper" {
				t.Errorf("%s: namespace %s, type %s, annotations %v: want the scraper's token in %s", k, s.Namespace, s.Type, s.Annotations, ns)
			}
		}
	}
	for _, k := range []string{"ServiceMonitor/modelgate", "PrometheusRule/modelgate", "RoleBinding/modelgate-prometheus-discovery",
		"ClusterRoleBinding/modelgate-metrics-reader-scraper", "Secret/modelgate-metrics-scraper-token", "ServiceAccount/modelgate-metrics-scraper"} {
		if !seen[k] {
			t.Errorf("%s not rendered", k)
		}
	}
	_, err := helmTemplate(t, ns, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.prometheusServiceAccount.name=")
	if err == nil || !strings.Contains(err.Error(), "metrics.serviceMonitor.prometheusServiceAccount.name: required") {
		t.Errorf("err = %v, want metrics.serviceMonitor.prometheusServiceAccount.name: required", err)
	}
}

// eachClientConfig calls f with every webhook clientConfig under x.
func eachClientConfig(x any, f func(map[string]any)) {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			if cc, ok := e.(map[string]any); ok && k == "clientConfig" {
				f(cc)
			}
			eachClientConfig(e, f)
		}
	case []any:
		for _, e := range v {
			eachClientConfig(e, f)
		}
	}
}
