// Package certmanager runs cert-manager in a test cluster: its CRDs, as its
// Go module ships them (deploy/crds, collected by the Makefile into
// bin/cert-manager/<version>/crds), and its own controllers and cainjector,
// built from its module by test/certmanager into
// bin/cert-manager/<version>/certmanager, as a child process. Start returns
// once cert-manager has issued a Certificate and injected its CA, and Stop
// leaves no process behind. Beside it, what a cert-manager mode install
// needs around modelgate run as a process rather than a Pod: the Secret's
// volume (MountSecret) and the route from the API server to the release's
// Service (ServiceProxy). test/suites/certmanager stands on it; `make
// run`'s launcher can, given a cluster and a kubeconfig.
package certmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// Version is the cert-manager whose controllers test/certmanager/go.mod
// requires and whose CRDs the Makefile collects: keep them equal.
const Version = "v1.21.2"

// Namespace is where cert-manager runs: a ClusterIssuer's Secrets (its
// cluster resource namespace), and the objects Start checks it with.
const Namespace = "cert-manager"

// startTimeout bounds Start's wait for cert-manager to act.
const startTimeout = 2 * time.Minute

// pollInterval is how often Start checks what it waits for.
const pollInterval = 200 * time.Millisecond

// Options configure Start.
type Options struct {
	// Binary is test/certmanager's program
	// (bin/cert-manager/<version>/certmanager); CRDs the folder of
	// cert-manager's CRDs (bin/cert-manager/<version>/crds). Dir, when
	// empty, is the folder holding both, as the Makefile writes them.
	Binary, CRDs string
	// Kubeconfig is the file the controllers authenticate with (an
	// administrator's: cert-manager's own RBAC is not what is tested).
	Kubeconfig string
	// Log is the file the controllers' output goes to.
	Log string
}

// Dir returns the folder the Makefile builds cert-manager into, under the
// repository root.
func Dir(root string) string {
	return filepath.Join(root, "bin", "cert-manager", Version)
}

// CertManager is cert-manager running against a cluster.
type CertManager struct {
	p   *cluster.Process
	log string
}

// Start installs cert-manager's CRDs in the cluster cfg reaches, starts
// its controllers and cainjector, and returns once they act: a
// self-signed Certificate in Namespace is Ready and the cainjector has
// injected its CA into a ValidatingWebhookConfiguration (both are then
// deleted). On error it stops what it started.
func Start(ctx context.Context, cfg *rest.Config, o Options) (*CertManager, error) {
	for name, v := range map[string]string{"Binary": o.Binary, "CRDs": o.CRDs, "Kubeconfig": o.Kubeconfig, "Log": o.Log} {
		if v == "" {
			return nil, fmt.Errorf("certmanager.Options.%s is required", name)
		}
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("cert-manager's controllers: %w (make cert-manager builds them)", err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{o.CRDs}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing cert-manager's CRDs from %s: %w", o.CRDs, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	p, err := cluster.StartProcess("cert-manager", o.Binary,
		[]string{"--kubeconfig", o.Kubeconfig, "--cluster-resource-namespace", Namespace}, o.Log)
	if err != nil {
		return nil, err
	}
	cm := &CertManager{p: p, log: o.Log}
	if err := cm.waitActs(ctx, c); err != nil {
		return nil, errors.Join(err, cm.Stop())
	}
	return cm, nil
}

// Scheme has Kubernetes' kinds and cert-manager's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = cmv1.AddToScheme(s)
	return s
}

// Exited is closed when the controllers' process has exited.
func (cm *CertManager) Exited() <-chan struct{} { return cm.p.Exited() }

// Log is the file the controllers write their output to.
func (cm *CertManager) Log() string { return cm.log }

// Stop stops the controllers (SIGTERM, then SIGKILL of the process group
// if they do not exit) and returns once the process is gone.
func (cm *CertManager) Stop() error { return cm.p.Stop() }

// errExited is returned by Poll when the controllers exit during a wait.
var errExited = errors.New("cert-manager exited")

// Poll polls cond every interval until it is true, ctx ends, timeout
// passes or the controllers exit: a wait on something cert-manager does.
// The error holds the last lines of the controllers' log.
func (cm *CertManager) Poll(ctx context.Context, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) error {
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-cm.p.Exited():
			return false, errExited
		default:
		}
		return cond(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w; last lines of %s:\n%s", what, err, cm.log, cluster.Tail(cm.log, 20))
	}
	return nil
}
