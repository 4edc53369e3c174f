package v1alpha1

import (
	"net"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CertificateMode is where the serving certificate comes from.
type CertificateMode string

// The certificate modes.
const (
	// CertificatesFiles serves webhook.certDir's files, reloaded when they
	// change (the default; what `make run` and envtest use).
	CertificatesFiles CertificateMode = "files"
	// CertificatesCertManager is files mode with the files written by
	// cert-manager and the CA bundle injected by its cainjector.
	CertificatesCertManager CertificateMode = "cert-manager"
	// CertificatesSelf has modelgate create, share, inject and rotate its
	// CA and serving certificate.
	CertificatesSelf CertificateMode = "self"
)

// CertificateModes are the accepted certificates.mode values.
var CertificateModes = []CertificateMode{CertificatesFiles, CertificatesCertManager, CertificatesSelf}

// Certificates configures the serving certificate.
type Certificates struct {
	// Mode is files (default), cert-manager or self.
	Mode CertificateMode `json:"mode,omitempty"`
	// Self configures mode self; ignored otherwise.
	Self SelfCertificates `json:"self,omitempty"`
}

// SelfCertificates configures the certificates modelgate manages itself.
type SelfCertificates struct {
	// SecretName is the Secret, in modelgate's namespace, holding the CA
	// and the serving certificate all replicas serve. Defaults to
	// modelgate-webhook-tls.
	SecretName string `json:"secretName,omitempty"`
	// ServiceName is the webhook Service: the certificate is for
	// <service>, <service>.<namespace>, <service>.<namespace>.svc and
	// <service>.<namespace>.svc.cluster.local. Defaults to
	// modelgate-webhook.
	ServiceName string `json:"serviceName,omitempty"`
	// ExtraDNSNames and IPAddresses are added to the certificate (for a
	// webhook reached by URL, as in local development).
	ExtraDNSNames []string `json:"extraDNSNames,omitempty"`
	IPAddresses   []string `json:"ipAddresses,omitempty"`
	// CALifetime is the CA's validity. Defaults to 8760h (a year).
	CALifetime *metav1.Duration `json:"caLifetime,omitempty"`
	// ServingLifetime is the serving certificate's validity. Defaults to
	// 2160h (90 days).
	ServingLifetime *metav1.Duration `json:"servingLifetime,omitempty"`
	// RenewBefore is how long before its expiry the serving certificate is
	// replaced; the CA is replaced ServingLifetime+RenewBefore before its
	// own, so the certificates it signed never outlive it. Defaults to
	// 720h (30 days).
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
	// InjectionGrace is how long a new CA is in the injected bundles
	// before a serving certificate it signed is used, so that every API
	// server has seen the bundle. Defaults to 1m.
	InjectionGrace *metav1.Duration `json:"injectionGrace,omitempty"`
	// CheckInterval is how often each replica reads the Secret (to pick up
	// another replica's rotation) and checks expiry. Defaults to 1m.
	CheckInterval *metav1.Duration `json:"checkInterval,omitempty"`
	// MutatingWebhookConfigurations, ValidatingWebhookConfigurations and
	// CustomResourceDefinitions get the CA bundle. Default to
	// modelgate-mutating, modelgate-validating and
	// aiinferences.serving.modelgate.io (its conversion webhook).
	MutatingWebhookConfigurations   []string `json:"mutatingWebhookConfigurations,omitempty"`
	ValidatingWebhookConfigurations []string `json:"validatingWebhookConfigurations,omitempty"`
	CustomResourceDefinitions       []string `json:"customResourceDefinitions,omitempty"`
}

// Defaults of the self-managed certificates.
const (
	DefaultCertSecretName      = "modelgate-webhook-tls" //nolint:gosec // a Secret name, not a credential.
	DefaultWebhookServiceName  = "modelgate-webhook"
	DefaultCALifetime          = 365 * 24 * time.Hour
	DefaultServingLifetime     = 90 * 24 * time.Hour
	DefaultRenewBefore         = 30 * 24 * time.Hour
	DefaultInjectionGrace      = time.Minute
	DefaultCertCheckInterval   = time.Minute
	DefaultMutatingWebhookName = "modelgate-mutating"
	DefaultValidatingWebhook   = "modelgate-validating"
	DefaultConversionCRD       = "aiinferences.serving.modelgate.io"
)

func defaultCertificates(c *Certificates) {
	if c.Mode == "" {
		c.Mode = CertificatesFiles
	}
	s := &c.Self
	if s.SecretName == "" {
		s.SecretName = DefaultCertSecretName
	}
	if s.ServiceName == "" {
		s.ServiceName = DefaultWebhookServiceName
	}
	for _, d := range []struct {
		p *(*metav1.Duration)
		v time.Duration
	}{
		{&s.CALifetime, DefaultCALifetime}, {&s.ServingLifetime, DefaultServingLifetime},
		{&s.RenewBefore, DefaultRenewBefore}, {&s.InjectionGrace, DefaultInjectionGrace},
		{&s.CheckInterval, DefaultCertCheckInterval},
	} {
		if *d.p == nil {
			*d.p = &metav1.Duration{Duration: d.v}
		}
	}
	if s.MutatingWebhookConfigurations == nil {
		s.MutatingWebhookConfigurations = []string{DefaultMutatingWebhookName}
	}
	if s.ValidatingWebhookConfigurations == nil {
		s.ValidatingWebhookConfigurations = []string{DefaultValidatingWebhook}
	}
	if s.CustomResourceDefinitions == nil {
		s.CustomResourceDefinitions = []string{DefaultConversionCRD}
	}
}

func validateCertificates(c *Certificates, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.Mode {
	case CertificatesFiles, CertificatesCertManager, CertificatesSelf:
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), c.Mode, CertificateModes))
	}
	s, sp := &c.Self, p.Child("self")
	for _, n := range []struct{ field, value string }{{"secretName", s.SecretName}, {"serviceName", s.ServiceName}} {
		if msgs := validation.IsDNS1123Subdomain(n.value); len(msgs) > 0 {
			errs = append(errs, field.Invalid(sp.Child(n.field), n.value, msgs[0]))
		}
	}
	for i, n := range s.ExtraDNSNames {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, field.Invalid(sp.Child("extraDNSNames").Index(i), n, msgs[0]))
		}
	}
	for i, ip := range s.IPAddresses {
		if net.ParseIP(ip) == nil {
			errs = append(errs, field.Invalid(sp.Child("ipAddresses").Index(i), ip, "must be an IPv4 or IPv6 address"))
		}
	}
	ca, serving, renew := s.CALifetime.Duration, s.ServingLifetime.Duration, s.RenewBefore.Duration
	if serving <= 0 {
		errs = append(errs, field.Invalid(sp.Child("servingLifetime"), serving.String(), "must be positive"))
	}
	if renew <= 0 || renew >= serving {
		errs = append(errs, field.Invalid(sp.Child("renewBefore"), renew.String(),
			"must be positive and shorter than servingLifetime"))
	}
	if ca < 2*(serving+renew) {
		errs = append(errs, field.Invalid(sp.Child("caLifetime"), ca.String(),
			"must be at least twice servingLifetime+renewBefore, so a CA signs for at least as long as it is being replaced"))
	}
	if g := s.InjectionGrace.Duration; g < 0 || g >= renew {
		errs = append(errs, field.Invalid(sp.Child("injectionGrace"), g.String(), "must be from 0s to less than renewBefore"))
	}
	if d := s.CheckInterval.Duration; d <= 0 || d > renew/2 {
		errs = append(errs, field.Invalid(sp.Child("checkInterval"), d.String(),
			"must be positive and at most half of renewBefore, so every replica sees a rotation in time"))
	}
	return errs
}
