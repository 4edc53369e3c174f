package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// TestHelmInstall installs the chart with helm into a real kube-apiserver,
// as a user would (self-managed certificates: the cluster has no
// cert-manager), upgrades it and uninstalls it.
func TestHelmInstall(t *testing.T) {
	helm := helmBinary(t)
	root, te, cfg := startAPIServer(t)
	u, err := te.AddUser(envtest.User{Name: "helm-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "charts/modelgate")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(helm, append(args, "--kubeconfig", kubeconfig)...)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deployment := func() *appsv1.Deployment {
		t.Helper()
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "modelgate"}, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}

	run("install", "modelgate", chart, "--namespace", env.Namespace, "--create-namespace",
		"--set", "certificates.mode=self", "--set", "policyReports.installCRD=true")
	for _, name := range []string{"aiinferences.serving.modelgate.io", "workloadpolicies.policy.modelgate.io", "policyreports.wgpolicyk8s.io"} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			t.Errorf("CRD %s: %v", name, err)
		}
	}
	for name, obj := range map[string]client.Object{
		"modelgate-mutating":   &admissionregistrationv1.MutatingWebhookConfiguration{},
		"modelgate-validating": &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	if err := c.Get(ctx, client.ObjectKey{Name: "modelgate-cabundle-only"}, &vap); err != nil {
		t.Errorf("ValidatingAdmissionPolicy: %v", err)
	}
	d := deployment()
	if *d.Spec.Replicas != 2 || d.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("Deployment: %d replicas, labels %v; want 2, managed by Helm", *d.Spec.Replicas, d.Labels)
	}
	checksum := d.Spec.Template.Annotations["checksum/configuration"]

	run("upgrade", "modelgate", chart, "--namespace", env.Namespace, "--reuse-values", "--set", "replicas=3")
	if d := deployment(); *d.Spec.Replicas != 3 || d.Spec.Template.Annotations["checksum/configuration"] != checksum {
		t.Errorf("after upgrading replicas: %d replicas, checksum %s (was %s); want 3, unchanged",
			*d.Spec.Replicas, d.Spec.Template.Annotations["checksum/configuration"], checksum)
	}
	run("upgrade", "modelgate", chart, "--namespace", env.Namespace, "--reuse-values", "--set", "configuration.audit.interval=30m")
	if d := deployment(); d.Spec.Template.Annotations["checksum/configuration"] == checksum {
		t.Error("a changed Configuration does not change the pod template: the pods would not restart")
	}

	run("uninstall", "modelgate", "--namespace", env.Namespace)
	var gone appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "modelgate"}, &gone); !apierrors.IsNotFound(err) {
		t.Errorf("after uninstall, the Deployment: %v", err)
	}
}
