// Package install checks modelgate's installs as a cluster receives them:
// config/'s kustomizations rendered and strictly decoded (the objects, RBAC,
// certificates, NetworkPolicy, the CA bundle policy, config/prometheus), the
// Helm chart against them (its TestHelm tests need MODELGATE_HELM, the helm
// `make helm-lint` builds), and, on a real kube-apiserver (envtest's, as
// KUBEBUILDER_ASSETS or bin/k8s holds it), the CA bundle policy enforced,
// the AIInference controller waiting for its CRD, and a helm install.
// `make test-integration` runs it; the tests that start a kube-apiserver
// skip in -short mode.
package install

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// The installs: the production one, with cert-manager, and the one where
// modelgate manages its own certificates.
const (
	defaultInstall     = "config/default"
	selfManagedInstall = "config/self-managed"
)

var installs = []string{defaultInstall, selfManagedInstall}

// decoded renders and strictly decodes the kustomizations (relative to the
// repository root) and returns their objects together.
func decoded(t *testing.T, dirs ...string) []client.Object {
	t.Helper()
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out []client.Object
	for _, dir := range dirs {
		objs, err := env.DecodeInstall(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, objs...)
	}
	return out
}

// ofType returns the objects of one Go type.
func ofType[T client.Object](objs []client.Object) []T {
	var out []T
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// only returns the one object of a Go type, failing the test when there
// are none or several.
func only[T client.Object](t *testing.T, objs []client.Object) T {
	t.Helper()
	all := ofType[T](objs)
	if len(all) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, got %d", zero, len(all))
	}
	return all[0]
}

// modelgateContainer returns the Deployment's modelgate container.
func modelgateContainer(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == "modelgate" {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container modelgate", d.Name)
	return nil
}

// installConfiguration returns the Configuration the Deployment serves
// with: the file its --config flag names, read from the ConfigMap mounted
// at that directory, strictly parsed, defaulted and validated.
func installConfiguration(t *testing.T, objs []client.Object) *config.Configuration {
	t.Helper()
	d := only[*appsv1.Deployment](t, objs)
	c := modelgateContainer(t, d)
	var path string
	for _, a := range c.Args {
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			path = p
		}
	}
	if path == "" {
		t.Fatalf("container args %q have no --config=", c.Args)
	}
	for _, m := range c.VolumeMounts {
		if filepath.Dir(path) != m.MountPath {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			for _, cm := range ofType[*corev1.ConfigMap](objs) {
				if cm.Name != v.ConfigMap.Name || cm.Namespace != d.Namespace {
					continue
				}
				data, ok := cm.Data[filepath.Base(path)]
				if !ok {
					t.Fatalf("ConfigMap %s has no key %s", cm.Name, filepath.Base(path))
				}
				cfg, err := config.Parse([]byte(data))
				if err != nil {
					t.Fatalf("ConfigMap %s: %v", cm.Name, err)
				}
				return cfg
			}
			t.Fatalf("volume %s names ConfigMap %s, which is not rendered", v.Name, v.ConfigMap.Name)
		}
	}
	t.Fatalf("no ConfigMap volume is mounted at %s, the directory of --config=%s", filepath.Dir(path), path)
	return nil
}

// servingSecret returns the Secret the Deployment mounts where the
// Configuration says the serving certificate is (webhook.certDir), or ""
// when it mounts none there.
// TestSelfManagedInstall checks that config/self-managed needs no
// cert-manager and lets the pods start before the certificate Secret exists.
func TestSelfManagedInstall(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := render.Render(filepath.Join(root, selfManagedInstall))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range raw {
		if u.GroupVersionKind().Group == "cert-manager.io" {
			t.Errorf("renders %s %s: cert-manager may not run in the cluster", u.GetKind(), u.GetName())
		}
		if v, ok := u.GetAnnotations()[env.InjectCAFromAnnotation]; ok {
			t.Errorf("%s %s has %s: %s, but modelgate injects its own CA", u.GetKind(), u.GetName(), env.InjectCAFromAnnotation, v)
		}
	}
	objs, err := env.DecodeStrict(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := only[*appsv1.Deployment](t, objs)
	volumes := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = true
		if v.Secret != nil {
			t.Errorf("volume %s mounts Secret %s: pods would wait in ContainerCreating for a Secret only they create", v.Name, v.Secret.SecretName)
		}
	}
	for _, m := range modelgateContainer(t, d).VolumeMounts {
		if !volumes[m.Name] {
			t.Errorf("volumeMount %s at %s names no volume", m.Name, m.MountPath)
		}
	}
	cfg := installConfiguration(t, objs)
	if cfg.Certificates.Mode != config.CertificatesSelf {
		t.Errorf("certificates.mode = %q, want %q", cfg.Certificates.Mode, config.CertificatesSelf)
	}
	want := []string{cfg.Namespace + "/" + cfg.Certificates.Self.ServiceName}
	if got := calledServices(objs); !slices.Equal(got, want) {
		t.Errorf("webhooks call Services %q; the self-managed certificate is for %q (certificates.self.serviceName)", got, want)
	}
}

// TestInstallsDifferOnlyInCertificates keeps the two installs from
// drifting: config/self-managed holds every object of config/default but
// cert-manager's, plus what self-managed certificates need and nothing
// else.
func TestInstallsDifferOnlyInCertificates(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// ids are the objects of an install, cert-manager's left out.
	ids := func(dir string) []string {
		objs, err := render.Render(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range objs {
			if u.GroupVersionKind().Group != "cert-manager.io" {
				out = append(out, objectID(u))
			}
		}
		return out
	}
	// By design, only the self-managed install has the permissions of its
	// certificate rotator (config/self-managed/rbac: the certificate
	// Secret, CA injection) and the policy that holds those permissions
	// to the caBundle fields (cabundle-only-policy.yaml). The cert-manager
	// install needs neither: modelgate writes no webhook configuration or
	// CRD there.
	selfOnly := []string{
		"ClusterRole /modelgate-certificates",
		"ClusterRoleBinding /modelgate-certificates",
		"Role " + env.Namespace + "/modelgate-certificates",
		"RoleBinding " + env.Namespace + "/modelgate-certificates",
		"ValidatingAdmissionPolicy /" + caBundlePolicy,
		"ValidatingAdmissionPolicyBinding /" + caBundlePolicy,
	}
	want := slices.Concat(ids(defaultInstall), selfOnly)
	slices.Sort(want)
	got := ids(selfManagedInstall)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-%s without cert-manager's, with self mode's own; +%s):\n%s", defaultInstall, selfManagedInstall, diff)
	}
}

// objectID is kind namespace/name, a generated ConfigMap's name without
// the content hash kustomize appends.
func objectID(u *unstructured.Unstructured) string {
	name := u.GetName()
	if u.GetKind() == "ConfigMap" {
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i]
		}
	}
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), name)
}

// TestInstallConfigurations checks that each install runs
// config/manager/configuration.yaml with its own certificates.mode, and
// nothing else changed (make manifests writes the copies).
func TestInstallConfigurations(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	base, err := config.Load(filepath.Join(root, "config", "manager", "configuration.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for dir, mode := range map[string]config.CertificateMode{
		defaultInstall:     config.CertificatesCertManager,
		selfManagedInstall: config.CertificatesSelf,
	} {
		t.Run(dir, func(t *testing.T) {
			got := installConfiguration(t, decoded(t, dir))
			want := *base
			want.Certificates.Mode = mode
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("Configuration (-config/manager's with certificates.mode %s +%s's): run make manifests\n%s", mode, dir, diff)
			}
		})
	}
}

// containerPort returns the number of the modelgate container's port with
// the name.
func containerPort(t *testing.T, d *appsv1.Deployment, name string) int32 {
	t.Helper()
	for _, p := range modelgateContainer(t, d).Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container modelgate has no port %s", name)
	return 0
}

// resolvePort returns the number of a port given by number or by the name
// of one of the modelgate container's ports.
func resolvePort(t *testing.T, d *appsv1.Deployment, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.String {
		return containerPort(t, d, p.StrVal)
	}
	return p.IntVal
}

// TestNetworkPolicy checks that modelgate's pods accept the API server on
// the webhook port from anywhere, metrics only from labelled namespaces,
// and nothing else.
func TestNetworkPolicy(t *testing.T) {
	for _, dir := range installs {
		t.Run(dir, func(t *testing.T) {
			objs := decoded(t, dir)
			d := only[*appsv1.Deployment](t, objs)
			np := only[*networkingv1.NetworkPolicy](t, objs)
			if np.Namespace != d.Namespace {
				t.Errorf("NetworkPolicy is in %s, the pods in %s", np.Namespace, d.Namespace)
			}
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				t.Fatal(err)
			}
			if sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("podSelector %s does not select the Deployment's pods %v (or selects every pod)", sel, d.Spec.Template.Labels)
			}
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				t.Errorf("policyTypes %q lack Ingress: other ingress is not denied", np.Spec.PolicyTypes)
			}

			// The port the API server reaches: the Service's targetPort.
			svc := only[*corev1.Service](t, objs)
			if len(svc.Spec.Ports) != 1 {
				t.Fatalf("Service %s has %d ports, want the webhook's only", svc.Name, len(svc.Spec.Ports))
			}
			webhook := resolvePort(t, d, svc.Spec.Ports[0].TargetPort)
			metrics := containerPort(t, d, "metrics")
			health := containerPort(t, d, "health")

			allowed := map[int32][]networkingv1.NetworkPolicyPeer{}
			for i, r := range np.Spec.Ingress {
				if len(r.Ports) == 0 {
					t.Errorf("ingress rule %d allows every port", i)
				}
				for _, p := range r.Ports {
					if p.Port == nil || p.EndPort != nil {
						t.Errorf("ingress rule %d allows a port range %+v", i, p)
						continue
					}
					if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
						t.Errorf("ingress rule %d port %s is %s, not TCP", i, p.Port, *p.Protocol)
					}
					key := resolvePort(t, d, *p.Port)
					if peers, seen := allowed[key]; seen && (len(peers) == 0 || len(r.From) == 0) {
						allowed[key] = nil // from anywhere wins
					} else {
						allowed[key] = append(peers, r.From...)
					}
				}
			}
			for name, tc := range map[string]struct {
				port          int32
				fromAnywhere  bool
				fromNamespace map[string]string
			}{
				"webhook": {port: webhook, fromAnywhere: true},
				"metrics": {port: metrics, fromNamespace: map[string]string{"metrics": "enabled"}},
			} {
				peers, ok := allowed[tc.port]
				switch {
				case !ok:
					t.Errorf("%s port %d is not allowed", name, tc.port)
				case tc.fromAnywhere && len(peers) > 0:
					t.Errorf("%s port %d is allowed only from %+v; the API server cannot be selected", name, tc.port, peers)
				case !tc.fromAnywhere && len(peers) == 0:
					t.Errorf("%s port %d is allowed from anywhere", name, tc.port)
				}
				for _, p := range peers {
					if p.IPBlock != nil || p.PodSelector != nil || p.NamespaceSelector == nil ||
						!cmp.Equal(p.NamespaceSelector.MatchLabels, tc.fromNamespace) || len(p.NamespaceSelector.MatchExpressions) > 0 {
						t.Errorf("%s port %d is allowed from %+v, want namespaces labelled %v", name, tc.port, p, tc.fromNamespace)
					}
				}
				delete(allowed, tc.port)
			}
			if _, ok := allowed[health]; ok {
				t.Errorf("health port %d is allowed: the kubelet needs no rule, nobody else needs it", health)
			}
			for port := range allowed {
				t.Errorf("port %d is allowed, beyond webhook and metrics", port)
			}
		})
	}
}

// TestDeploymentAvailability checks what keeps the fail-closed webhooks
// answering: two replicas spread over nodes and zones, a
// PodDisruptionBudget, readiness on /readyz, no CPU limit.
func TestDeploymentAvailability(t *testing.T) {
	for _, dir := range installs {
		t.Run(dir, func(t *testing.T) {
			objs := decoded(t, dir)
			d := only[*appsv1.Deployment](t, objs)
			pods := labels.Set(d.Spec.Template.Labels)
			replicas := int32(1) // the API server's default
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			if replicas < 2 {
				t.Errorf("replicas = %d, want at least 2", replicas)
			}

			var pdbs []string
			for _, pdb := range ofType[*policyv1.PodDisruptionBudget](objs) {
				sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				if err != nil {
					t.Fatalf("PodDisruptionBudget %s: %v", pdb.Name, err)
				}
				if pdb.Namespace != d.Namespace || sel.Empty() || !sel.Matches(pods) {
					continue
				}
				pdbs = append(pdbs, pdb.Name)
				// At least one replica stays through a drain, and a drain
				// can proceed (integers: a percentage rounds by replicas).
				minAvailable, maxUnavailable := pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable
				switch {
				case minAvailable != nil && minAvailable.Type == intstr.Int && minAvailable.IntVal >= 1 && minAvailable.IntVal < replicas:
				case maxUnavailable != nil && maxUnavailable.Type == intstr.Int && maxUnavailable.IntVal >= 1 && maxUnavailable.IntVal < replicas:
				default:
					t.Errorf("PodDisruptionBudget %s minAvailable %v, maxUnavailable %v: want 1 <= either < replicas %d", pdb.Name, minAvailable, maxUnavailable, replicas)
				}
			}
			if len(pdbs) == 0 {
				t.Errorf("no PodDisruptionBudget selects the pods %v", pods)
			}

			spread := map[string]bool{}
			for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
				sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
				if err != nil {
					t.Fatal(err)
				}
				if !sel.Empty() && sel.Matches(pods) && c.MaxSkew == 1 && c.WhenUnsatisfiable == corev1.ScheduleAnyway {
					spread[c.TopologyKey] = true
				}
			}
			for _, key := range []string{corev1.LabelHostname, corev1.LabelTopologyZone} {
				if !spread[key] {
					t.Errorf("no topologySpreadConstraint spreads the pods over %s (maxSkew 1, ScheduleAnyway)", key)
				}
			}

			c := modelgateContainer(t, d)
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				t.Errorf("container has a CPU limit %s: throttling shows up as admission latency", c.Resources.Limits.Cpu())
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					t.Errorf("container requests no %s", r)
				}
			}
			if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Error("container has no memory limit")
			}
			if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
				t.Errorf("readinessProbe %+v does not gate on /readyz", p)
			}
		})
	}
}

// TestMetricsEndpoint checks that each install serves its metrics securely
// (HTTPS, a token allowed to get /metrics) on the port the Deployment names
// metrics, the one TestNetworkPolicy holds the NetworkPolicy to.
func TestMetricsEndpoint(t *testing.T) {
	for _, dir := range installs {
		t.Run(dir, func(t *testing.T) {
			objs := decoded(t, dir)
			cfg := installConfiguration(t, objs)
			if cfg.Metrics.Secure == nil || !*cfg.Metrics.Secure {
				t.Errorf("metrics.secure is not true: the metrics are served over plain HTTP to whoever reaches the port")
			}
			_, port, err := net.SplitHostPort(cfg.Metrics.BindAddress)
			if err != nil {
				t.Fatalf("metrics.bindAddress %q: %v", cfg.Metrics.BindAddress, err)
			}
			d := only[*appsv1.Deployment](t, objs)
			if want := strconv.Itoa(int(containerPort(t, d, "metrics"))); port != want {
				t.Errorf("metrics.bindAddress %q, the container port named metrics is %s", cfg.Metrics.BindAddress, want)
			}
		})
	}
}
