package webhook

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/certs"
)

// newRotator returns the self-managed certificate rotator the
// Configuration asks for, or nil in files and cert-manager modes (the
// webhook server then serves certDir's files, reloaded on change). Its
// clients are set by addRotator once the manager exists.
func newRotator(cfg *config.Configuration) *certs.Rotator {
	if cfg.Certificates.Mode != config.CertificatesSelf {
		return nil
	}
	s := &cfg.Certificates.Self
	svc, ns := s.ServiceName, cfg.Namespace
	names := append([]string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local", svc, svc + "." + ns}, s.ExtraDNSNames...)
	ips := make([]net.IP, 0, len(s.IPAddresses))
	for _, ip := range s.IPAddresses {
		ips = append(ips, net.ParseIP(ip))
	}
	return &certs.Rotator{
		Namespace:  ns,
		SecretName: s.SecretName,
		Options: certs.Options{
			DNSNames:        names,
			IPs:             ips,
			CALifetime:      s.CALifetime.Duration,
			ServingLifetime: s.ServingLifetime.Duration,
			RenewBefore:     s.RenewBefore.Duration,
			InjectionGrace:  s.InjectionGrace.Duration,
		},
		Targets: certs.Targets{
			Mutating:   s.MutatingWebhookConfigurations,
			Validating: s.ValidatingWebhookConfigurations,
			CRDs:       s.CustomResourceDefinitions,
		},
		Interval: s.CheckInterval.Duration,
		OnChange: func(step certs.Step) { certRotations.WithLabelValues(step.String()).Inc() },
	}
}

// servingCertificate makes the webhook server take its certificate from
// the rotator instead of watching certDir.
func servingCertificate(r *certs.Rotator) func(*tls.Config) {
	return func(c *tls.Config) { c.GetCertificate = r.GetCertificate }
}

// addRotator gives the rotator the manager's clients, runs it with the
// manager and gates readiness on its certificate being trusted.
func addRotator(mgr manager.Manager, r *certs.Rotator) error {
	r.Client, r.Reader = mgr.GetClient(), mgr.GetAPIReader()
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("adding the certificate rotator: %w", err)
	}
	if err := mgr.AddReadyzCheck("certificates", r.Ready); err != nil {
		return fmt.Errorf("adding readiness check certificates: %w", err)
	}
	certExpiryOnce.Do(func() {
		defaultRegistry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "modelgate_serving_certificate_expiry_timestamp_seconds",
			Help: "When the serving certificate this replica serves expires (self mode), as a Unix time; 0 before it has one.",
		}, func() float64 {
			if t := r.NotAfter(); !t.IsZero() {
				return float64(t.Unix())
			}
			return 0
		}))
		defaultRegistry.MustRegister(certRotations)
		// Both steps exist at 0, so that the first rotation shows as an
		// increase.
		for _, step := range []certs.Step{certs.StepNewCA, certs.StepNewServing} {
			certRotations.WithLabelValues(step.String())
		}
	})
	return nil
}

var (
	certExpiryOnce sync.Once
	certRotations  = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelgate_certificate_rotations_total",
		Help: "Changes this replica made to the self-managed certificate Secret, by step (new CA, new serving certificate).",
	}, []string{"step"})
)
