package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// Names the harness creates.
const (
	// teamNamespace holds the workloads: every review names it, and the
	// API server traffic of the rolling restart goes there.
	teamNamespace = "soak-team"
	teamName      = "ml-platform"
	// scraperAccount is the ServiceAccount whose token reads the metrics,
	// bound to config/rbac's modelgate-metrics-reader.
	scraperAccount = "soak-metrics-scraper"
	developerName  = "soak-developer@example.com"
)

// controlPlane is envtest's etcd and kube-apiserver with modelgate's CRDs,
// RBAC, webhook configurations (config/webhook, pointing at the
// balancer's address with envtest's CA) and the policy library installed.
type controlPlane struct {
	te    *envtest.Environment
	admin client.Client
	// developer is a cluster administrator authenticating with a client
	// certificate, as a human with kubectl would: the requester modelgate
	// sees on the rolling restart's writes.
	developer    client.Client
	developerCfg *rest.Config
	// balancerAddr is where the webhook configurations send the API server.
	balancerAddr string
	// certDir and caData are the serving certificate the replicas share and
	// the CA the webhook configurations trust.
	certDir string
	caData  []byte
	// modelgateKubeconfig authenticates as modelgate's ServiceAccount, with
	// config/rbac's permissions only.
	modelgateKubeconfig string
	// metricsToken is scraperAccount's token.
	metricsToken string
	policies     int
}

// startControlPlane starts etcd and kube-apiserver with the webhooks
// pointing at a free local port for the balancer, and installs what
// modelgate needs.
func startControlPlane(ctx context.Context, root, dir string) (cp *controlPlane, err error) {
	te, err := env.New(root)
	if err != nil {
		return nil, err
	}
	lbAddr, err := cluster.FreeAddr()
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(lbAddr)
	te.WebhookInstallOptions.LocalServingHost = host
	te.WebhookInstallOptions.LocalServingPort, _ = strconv.Atoi(port)
	adminCfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	cp = &controlPlane{te: te, balancerAddr: lbAddr, certDir: te.WebhookInstallOptions.LocalServingCertDir,
		caData: te.WebhookInstallOptions.LocalServingCAData}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.stop())
		}
	}()
	scheme, err := env.Scheme()
	if err != nil {
		return cp, err
	}
	if cp.admin, err = client.New(adminCfg, client.Options{Scheme: scheme}); err != nil {
		return cp, fmt.Errorf("creating the administrator's client: %w", err)
	}
	mg, err := env.ModelgateIdentity(ctx, te, cp.admin, root)
	if err != nil {
		return cp, err
	}
	cp.modelgateKubeconfig = filepath.Join(dir, "modelgate.kubeconfig")
	if err := cluster.WriteKubeconfig(mg, cp.modelgateKubeconfig); err != nil {
		return cp, err
	}
	dev, err := te.AddUser(envtest.User{Name: developerName, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return cp, fmt.Errorf("adding the developer: %w", err)
	}
	cp.developerCfg = dev.Config()
	cp.developerCfg.QPS, cp.developerCfg.Burst = -1, 0 // the load must not queue in the client
	if cp.developer, err = client.New(cp.developerCfg, client.Options{Scheme: scheme}); err != nil {
		return cp, fmt.Errorf("creating the developer's client: %w", err)
	}
	if err := cp.install(ctx, adminCfg); err != nil {
		return cp, err
	}
	return cp, nil
}

// install creates the team namespace and the metrics scraper's account
// and token.
func (cp *controlPlane) install(ctx context.Context, adminCfg *rest.Config) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNamespace,
		Labels: map[string]string{annotations.NamespaceTeam: teamName}}}
	if err := cp.admin.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating namespace %s: %w", teamNamespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: scraperAccount}}
	if err := cp.admin.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s: %w", scraperAccount, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: scraperAccount},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "modelgate-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: env.Namespace, Name: scraperAccount}},
	}
	if err := cp.admin.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to modelgate-metrics-reader: %w", scraperAccount, err)
	}
	cs, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return fmt.Errorf("creating a clientset: %w", err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(env.Namespace).CreateToken(ctx, scraperAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](int64((6 * time.Hour).Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for %s: %w", scraperAccount, err)
	}
	cp.metricsToken = tr.Status.Token
	return nil
}

// installPolicies creates the library's WorkloadPolicies
// (config/samples/policies). Their validating webhook must answer: a
// replica must be ready.
func (cp *controlPlane) installPolicies(ctx context.Context, root string) error {
	if err := env.Apply(ctx, cp.admin, filepath.Join(root, "config", "samples", "policies")); err != nil {
		return fmt.Errorf("installing the policy library: %w", err)
	}
	var list policyv1.WorkloadPolicyList
	if err := cp.admin.List(ctx, &list); err != nil {
		return fmt.Errorf("listing WorkloadPolicies: %w", err)
	}
	cp.policies = len(list.Items)
	return nil
}

// stop stops kube-apiserver and etcd.
func (cp *controlPlane) stop() error {
	if err := cp.te.Stop(); err != nil {
		return fmt.Errorf("stopping etcd and kube-apiserver: %w", err)
	}
	return nil
}
