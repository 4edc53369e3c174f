// Command certmanager runs cert-manager's own controllers, from its Go
// module, against a cluster given by a kubeconfig: what the cert-manager
// controller binary runs for Certificates (trigger, key manager, request
// manager, issuing, readiness, revision manager), the Issuer and
// ClusterIssuer controllers and the CertificateRequest approver and
// controllers of the selfSigned and CA issuers only, and the cainjector's
// reconcilers (webhook configurations, CRD conversion, APIServices), in one
// process. The test harness test/harnesses/certmanager starts it.
//
// cert-manager's binaries cannot be installed from the module proxy: their
// modules (cmd/controller, cmd/cainjector) replace the root module with a
// relative path. Their wiring (cmd/controller/app, cmd/cainjector/app) is
// what this file repeats, with cert-manager's own constructors: the
// controllers register themselves in cert-manager's pkg/controller when
// their packages are imported, and each is built from one ContextFactory
// exactly as cmd/controller/app.Run builds them; the cainjector's
// reconcilers come from pkg/controller/cainjector.RegisterAllInjectors, as
// cmd/cainjector/app.Run calls it. No controller logic is written here.
//
// It is its own module, beside modelgate's, so that cert-manager's
// controller dependencies (its ACME, Vault and Venafi clients, Gateway
// API clients, cloud SDKs that pkg/controller's context pulls in) never
// enter modelgate's go.mod, and so that cert-manager is compiled against
// the Kubernetes libraries it is released with (its go.mod's), not the
// newer ones modelgate requires.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// The controllers, each registering itself with pkg/controller.
	crapprover "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"

	// The issuer types the Issuer and ClusterIssuer controllers set up,
	// each registering itself with pkg/issuer.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Controllers are the names of the controllers run, as cert-manager's
// --controllers flag names them.
var Controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	crapprover.ControllerName,
	crca.CRControllerName,
	crselfsigned.CRControllerName,
	trigger.ControllerName,
	issuing.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// The defaults of cert-manager's ControllerConfiguration
// (internal/apis/config/controller/v1alpha1/defaults.go), which this
// module cannot import.
const (
	defaultQPS                    = 20
	defaultBurst                  = 50
	defaultWorkers                = 5
	defaultMinimumBackoffDuration = time.Hour
	defaultMaximumBackoffDuration = 32 * time.Hour
)

var defaultCopiedAnnotationPrefixes = []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"}

func main() {
	// Its own flag set: controller-runtime defines --kubeconfig on the
	// global one.
	fs := flag.NewFlagSet("certmanager", flag.ExitOnError)
	klog.InitFlags(fs)
	kubeconfig := fs.String("kubeconfig", "", "the kubeconfig of the cluster (required)")
	clusterResourceNamespace := fs.String("cluster-resource-namespace", "cert-manager",
		"the namespace of the Secrets a ClusterIssuer reads (its CA)")
	workers := fs.Int("workers", defaultWorkers, "the workers of each controller")
	_ = fs.Parse(os.Args[1:])
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "certmanager: --kubeconfig is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf.InitLogs()
	ctx = logf.NewContext(ctx, logf.Log)
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace, *workers); err != nil {
		logf.Log.Error(err, "certmanager stopped")
		os.Exit(1)
	}
}

// run runs the controllers and the cainjector until ctx ends or one fails.
func run(ctx context.Context, kubeconfig, clusterResourceNamespace string, workers int) error {
	g, ctx := errgroup.WithContext(ctx)
	if err := startControllers(ctx, g, kubeconfig, clusterResourceNamespace, workers); err != nil {
		return err
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	g.Go(func() error { return runCAInjector(ctx, restConfig) })
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startControllers builds each controller from one ContextFactory and
// starts it and the shared informers, as cmd/controller/app.Run does.
func startControllers(ctx context.Context, g *errgroup.Group, kubeconfig, clusterResourceNamespace string, workers int) error {
	log := logf.FromContext(ctx)
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   defaultQPS,
		KubernetesAPIBurst: defaultBurst,
		IssuerOptions:      controller.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		CertificateOptions: controller.CertificateOptions{
			CopiedAnnotationPrefixes:                 defaultCopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: defaultMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: defaultMaximumBackoffDuration,
		},
	})
	if err != nil {
		return fmt.Errorf("building cert-manager's controller context: %w", err)
	}
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building cert-manager's controller context: %w", err)
	}
	known := controller.Known()
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range Controllers {
		if !slices.Contains(names, n) {
			return fmt.Errorf("controller %s is not registered (registered: %v)", n, names)
		}
	}
	for _, n := range Controllers {
		iface, err := known[n](factory)
		if err != nil {
			return fmt.Errorf("building controller %s: %w", n, err)
		}
		g.Go(func() error {
			log.Info("starting controller", "controller", n)
			return iface.Run(workers, ctx)
		})
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	g.Go(func() error {
		<-ctx.Done()
		base.HTTP01ResourceMetadataInformersFactory.Shutdown()
		base.KubeSharedInformerFactory.Shutdown()
		base.SharedInformerFactory.Shutdown()
		return nil
	})
	return nil
}
