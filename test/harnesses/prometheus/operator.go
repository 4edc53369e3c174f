package prometheus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// OperatorModule is the Prometheus Operator's module; hack/prometheus-operator
// pins its version, and the Makefile builds its cmd/operator into bin/.
const OperatorModule = "github.com/prometheus-operator/prometheus-operator"

// The Operator's own identity, as its module's example RBAC
// (example/rbac/prometheus-operator) creates it.
const (
	OperatorNamespace      = "default"
	OperatorServiceAccount = "prometheus-operator"
)

// operatorRBAC are the files of the module's example/rbac/prometheus-operator
// that give the Operator its identity and permissions, applied unchanged.
var operatorRBAC = []string{
	"prometheus-operator-service-account.yaml",
	"prometheus-operator-cluster-role.yaml",
	"prometheus-operator-cluster-role-binding.yaml",
}

// InstallOperator creates the Prometheus Operator's CRDs, as the binary
// prints them (`operator crds`, embedded from its module's
// example/prometheus-operator-crd), waits until the API server serves
// them, and creates the Operator's service account, ClusterRole and
// ClusterRoleBinding from its module's example RBAC, unchanged. root is
// the repository (hack/prometheus-operator pins the module).
func InstallOperator(ctx context.Context, c client.Client, binary, root string) error {
	out, err := exec.CommandContext(ctx, binary, "crds").Output()
	if err != nil {
		return fmt.Errorf("%s crds: %w", binary, err)
	}
	crds, err := decodeAll(out)
	if err != nil {
		return fmt.Errorf("the Operator's CRDs: %w", err)
	}
	for _, u := range crds {
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("creating CRD %s: %w", u.GetName(), err)
		}
	}
	for _, u := range crds {
		if err := waitEstablished(ctx, c, u.GetName()); err != nil {
			return err
		}
	}
	dir, err := operatorModuleDir(ctx, root)
	if err != nil {
		return err
	}
	for _, f := range operatorRBAC {
		b, err := os.ReadFile(filepath.Join(dir, "example", "rbac", "prometheus-operator", f)) //nolint:gosec // the module cache.
		if err != nil {
			return err
		}
		objs, err := decodeAll(b)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for _, u := range objs {
			if err := c.Create(ctx, u); err != nil {
				return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
			}
		}
	}
	return nil
}

// operatorModuleDir is where the Go module cache holds the Operator's
// module at the version hack/prometheus-operator requires.
func operatorModuleDir(ctx context.Context, root string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", OperatorModule)
	cmd.Dir = filepath.Join(root, "hack", "prometheus-operator")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("finding %s in the module cache: %w: %s", OperatorModule, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("%s is not in the module cache (make test-prometheus builds it)", OperatorModule)
	}
	return dir, nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == string(apiextensionsv1.Established) && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s is not established: %w", name, err)
	}
	return nil
}

// decodeAll decodes a YAML stream, skipping empty documents.
func decodeAll(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for doc := range strings.SplitSeq(string(b), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out, nil
}

// Operator is the Prometheus Operator running as a host process against
// the cluster's API server, as its own service account.
type Operator struct {
	// Log is the file its output goes to.
	Log  string
	proc *cluster.Process
}

// StartOperator runs binary (InstallOperator first) with the token of its
// service account, its kubeconfig and log in dir, watching every
// namespace, with the arguments of its module's example Deployment but the
// kubelet Service's (it has no kubelets to list here), and waits until it
// answers on its health endpoint. The caller stops it.
func StartOperator(ctx context.Context, admin *rest.Config, binary, dir string) (*Operator, error) {
	k8s, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	tr, err := k8s.CoreV1().ServiceAccounts(OperatorNamespace).CreateToken(ctx, OperatorServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for %s/%s: %w", OperatorNamespace, OperatorServiceAccount, err)
	}
	kubeconfig := filepath.Join(dir, "prometheus-operator.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "operator"}
	kc.CurrentContext = "operator"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	addr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	log := filepath.Join(dir, "prometheus-operator.log")
	proc, err := cluster.StartProcessEnv("prometheus-operator", binary, []string{
		"--web.listen-address=" + addr,
		"--watch-referenced-objects-in-all-namespaces=true",
		"--disable-unmanaged-prometheus-configuration=true",
		"--log-level=info",
	}, append(os.Environ(), "KUBECONFIG="+kubeconfig), log)
	if err != nil {
		return nil, err
	}
	if err := proc.WaitHTTPOK(ctx, "http://"+addr+"/healthz", time.Minute); err != nil {
		return nil, errors.Join(err, proc.Stop())
	}
	return &Operator{Log: log, proc: proc}, nil
}

// Stop stops the Operator (SIGTERM, then SIGKILL if it lingers).
func (o *Operator) Stop() error { return o.proc.Stop() }

// Exited is closed when the Operator exits.
func (o *Operator) Exited() <-chan struct{} { return o.proc.Exited() }
