package install

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// policyServer is a kube-apiserver holding config/self-managed as a cluster
// would, with clients for its administrator and for modelgate's service
// account.
type policyServer struct {
	te        *envtest.Environment
	scheme    *runtime.Scheme
	adminCfg  *rest.Config
	admin     client.Client
	modelgate client.Client
	// objs is the rendered install, decoded.
	objs []client.Object
}

// startPolicyServer starts a kube-apiserver, applies config/self-managed
// and waits until the CA bundle policy is enforced.
func startPolicyServer(t *testing.T) *policyServer {
	t.Helper()
	root, te, adminCfg := startAPIServer(t)
	var err error
	s := &policyServer{te: te, adminCfg: adminCfg, objs: decoded(t, selfManagedInstall)}
	if s.scheme, err = env.InstallScheme(); err != nil {
		t.Fatal(err)
	}
	if s.admin, err = client.New(adminCfg, client.Options{Scheme: s.scheme}); err != nil {
		t.Fatal(err)
	}
	// The whole install, server-side applied as kubectl would.
	raw, err := render.Render(filepath.Join(root, selfManagedInstall))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.ApplyObjects(t.Context(), s.admin, raw); err != nil {
		t.Fatal(err)
	}
	sa := only[*corev1.ServiceAccount](t, s.objs)
	s.modelgate = s.as(t, serviceAccountUser(sa.Namespace, sa.Name))
	// The install's RBAC is read from informers: wait until modelgate's
	// service account holds all of it, or a refusal by RBAC would pass
	// for one by the policy's binding not being loaded, or the other way.
	if err := env.WaitForPermissions(t.Context(), s.admin, serviceAccountUser(sa.Namespace, sa.Name), env.ServiceAccountGroups(sa.Namespace), raw); err != nil {
		t.Fatal(err)
	}
	s.waitForEnforcement(t)
	return s
}

// startAPIServer starts a bare kube-apiserver (and etcd) for the test,
// stopped after it, and returns the repository root, the environment and
// an administrator's configuration. It skips in -short mode and where the
// binaries are not built.
func startAPIServer(t *testing.T) (string, *envtest.Environment, *rest.Config) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a kube-apiserver: not in -short mode")
	}
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets, err := env.AssetsDir(root)
	if errors.Is(err, env.ErrNoBinaries) && os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skipf("%v: `make envtest` builds them", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := te.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := te.Stop(); err != nil {
			t.Errorf("stopping kube-apiserver: %v", err)
		}
	})
	return root, te, cfg
}

// serviceAccountUser is the username a service account's token
// authenticates as.
func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

// as returns a client that impersonates the user (a service account's
// username gets its groups), with the permissions the cluster grants it.
func (s *policyServer) as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(s.adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	if nsName, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		ns, _, _ := strings.Cut(nsName, ":")
		cfg.Impersonate.Groups = env.ServiceAccountGroups(ns)
	}
	c, err := client.New(cfg, client.Options{Scheme: s.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testTypeChecking runs kube-controller-manager's policy status
// controller, which type-checks a policy against the schemas of the
// resources it matches and writes status.typeChecking, and fails on any
// warning: an expression that does not compile, or that names a field
// the schema lacks. It needs kube-controller-manager beside kube-apiserver
// (`make cluster-tools` builds it).
func testTypeChecking(t *testing.T, s *policyServer) {
	kcm := filepath.Join(s.te.BinaryAssetsDirectory, "kube-controller-manager")
	if _, err := os.Stat(kcm); err != nil {
		t.Skipf("no %s (`make cluster-tools` builds it): %v", kcm, err)
	}
	user, err := s.te.AddUser(envtest.User{Name: "policy-status", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(kcm, "--kubeconfig="+filepath.Join(dir, "kubeconfig"),
		"--controllers=validatingadmissionpolicy-status-controller",
		"--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=false")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.admin.Get(ctx, client.ObjectKey{Name: caBundlePolicy}, vap); err != nil {
			return false, err
		}
		return vap.Status.ObservedGeneration == vap.Generation && vap.Status.TypeChecking != nil, nil
	})
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("%s was not type-checked: %v (status %+v); kube-controller-manager's log:\n%s", caBundlePolicy, err, vap.Status, b)
	}
	for _, w := range vap.Status.TypeChecking.ExpressionWarnings {
		t.Errorf("type checking %s: %s", w.FieldRef, w.Warning)
	}
}

// waitForEnforcement waits until the API server enforces the policy (its
// policy informer has both the policy and the binding): a dry-run label
// change by modelgate's service account is denied by the policy.
func (s *policyServer) waitForEnforcement(t *testing.T) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if last = s.modelgate.Get(ctx, client.ObjectKey{Name: "modelgate-mutating"}, m); last != nil {
			return false, nil //nolint:nilerr // polled again; the last error is reported on timeout
		}
		m.Labels = map[string]string{"probe": "enforced"}
		last = s.modelgate.Update(ctx, m, client.DryRunAll)
		return last != nil && strings.Contains(last.Error(), deniedByPolicy), nil
	})
	if err != nil {
		t.Fatalf("the policy is not enforced: %v (last answer: %v)", err, last)
	}
}

// caTargets are the three objects modelgate injects its CA into, by a
// name for subtests.
func caTargets() map[string]client.Object {
	return map[string]client.Object{
		"mutating webhook configuration":   &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "modelgate-mutating"}},
		"validating webhook configuration": &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "modelgate-validating"}},
		"CRD":                              &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: aiInferenceCRD}},
	}
}

// grant gives the subjects (by default modelgate's service account) the
// verbs, delete among them, on the three CA targets, beyond what the
// install grants, until the test ends. It returns once a dry-run delete by
// the first subject passes RBAC.
func grant(t *testing.T, s *policyServer, name string, verbs []string, subjects ...rbacv1.Subject) {
	t.Helper()
	if len(subjects) == 0 {
		sa := only[*corev1.ServiceAccount](t, s.objs)
		subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, ResourceNames: []string{"modelgate-mutating"}, Verbs: verbs},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations"}, ResourceNames: []string{"modelgate-validating"}, Verbs: verbs},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{aiInferenceCRD}, Verbs: verbs},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: subjects}
	for _, o := range []client.Object{role, binding} {
		if err := s.admin.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{binding, role} {
			if err := s.admin.Delete(context.Background(), o); err != nil {
				t.Error(err)
			}
		}
	})
	// RBAC is read from an informer: wait until the grant is seen.
	c := s.as(t, userOf(subjects[0]))
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		err := c.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "modelgate-mutating"}}, client.DryRunAll)
		return err == nil || strings.Contains(err.Error(), deniedByPolicy), nil
	})
	if err != nil {
		t.Fatalf("the grant %s is not in effect: %v", name, err)
	}
}

// userOf is the username of an RBAC subject (users and service accounts).
func userOf(s rbacv1.Subject) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		return serviceAccountUser(s.Namespace, s.Name)
	}
	return s.Name
}
