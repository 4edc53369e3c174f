package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/audit"
	"github.com/modelgate/modelgate/webhook"
)

// serveFlags are the serve subcommand's flags. A flag given on the command
// line overrides the same setting in the configuration file.
type serveFlags struct {
	configFile  string
	kubeconfig  string
	certDir     string
	webhookPort int
	metricsAddr string
	healthAddr  string
	enableHTTP2 bool
	policyDir   string
	certMode    string
	zap         zap.Options
}

func (f *serveFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.configFile, "config", "", "path to a Configuration file (config.modelgate.io/v1alpha1); defaults apply when empty")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster or $KUBECONFIG when empty")
	fs.StringVar(&f.certDir, "cert-dir", "", "directory holding tls.crt and tls.key; rotated files are reloaded (overrides webhook.certDir)")
	fs.IntVar(&f.webhookPort, "webhook-port", 0, "HTTPS port of the webhook server (overrides webhook.port)")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "", `metrics address, "0" to disable (overrides metrics.bindAddress)`)
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", "", "/healthz and /readyz address (overrides health.bindAddress)")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false, "serve HTTP/2 as well as HTTP/1.1 (overrides webhook.enableHTTP2)")
	fs.StringVar(&f.policyDir, "policy-dir", "", "directory of .rego policies, reloaded on change (overrides policy.directory)")
	fs.StringVar(&f.certMode, "certificates", "", "serving certificate mode: files, cert-manager or self (overrides certificates.mode)")
	f.zap = zap.Options{Development: false}
	f.zap.BindFlags(fs)
}

// apply writes the flags that were set over the configuration, then
// validates the result.
func (f *serveFlags) apply(fs *flag.FlagSet, c *config.Configuration) error {
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "cert-dir":
			c.Webhook.CertDir = f.certDir
		case "webhook-port":
			c.Webhook.Port = int32(f.webhookPort) //nolint:gosec // validated just below.
		case "metrics-bind-address":
			c.Metrics.BindAddress = f.metricsAddr
		case "health-probe-bind-address":
			c.Health.BindAddress = f.healthAddr
		case "enable-http2":
			c.Webhook.EnableHTTP2 = f.enableHTTP2
		case "policy-dir":
			c.Policy.Directory = f.policyDir
		case "certificates":
			c.Certificates.Mode = config.CertificateMode(f.certMode)
		}
	})
	if errs := c.Validate(); len(errs) > 0 {
		return fmt.Errorf("%w: %w", config.ErrInvalid, errs.ToAggregate())
	}
	return nil
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelgate serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	f.bind(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	logger := log.Log.WithName("serve")
	memLimit, memFrom, err := setMemoryLimit(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "modelgate serve: %v\n", err)
		return 1
	}

	cfg := config.New()
	if f.configFile != "" {
		var err error
		if cfg, err = config.Load(f.configFile); err != nil {
			fmt.Fprintf(stderr, "modelgate serve: %v\n", err)
			return 1
		}
	}
	if err := f.apply(fs, cfg); err != nil {
		fmt.Fprintf(stderr, "modelgate serve: flags: %v\n", err)
		return 1
	}
	rc, err := restConfig(f.kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "modelgate serve: %v\n", err)
		return 1
	}
	mgr, err := webhook.NewManager(rc, cfg, audit.Register)
	if err != nil {
		fmt.Fprintf(stderr, "modelgate serve: %v\n", err)
		return 1
	}
	if err := addController(mgr, cfg); err != nil {
		fmt.Fprintf(stderr, "modelgate serve: %v\n", err)
		return 1
	}
	logger.Info("starting", "version", version, "namespace", cfg.Namespace,
		"webhookPort", cfg.Webhook.Port, "certDir", cfg.Webhook.CertDir,
		"tlsMinVersion", cfg.Webhook.TLSMinVersion, "http2", cfg.Webhook.EnableHTTP2,
		"memoryLimit", memLimit, "memoryLimitFrom", memFrom, "aiinferenceController", cfg.ControllerEnabled())
	if err := mgr.Start(signals.SetupSignalHandler()); err != nil {
		logger.Error(err, "manager stopped")
		return 1
	}
	logger.Info("stopped")
	return 0
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		rc, err := ctrlconfig.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	return rc, nil
}
