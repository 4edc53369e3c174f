package v1alpha1

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TLSMinVersions are the accepted webhook.tlsMinVersion values.
var TLSMinVersions = []string{"1.2", "1.3"}

// Validate checks a defaulted Configuration and returns every problem with
// its field path.
func (c *Configuration) Validate() field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Label(c.Namespace); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), c.Namespace, msgs[0]))
	}
	w := field.NewPath("webhook")
	if msgs := validation.IsValidPortNum(int(c.Webhook.Port)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(w.Child("port"), c.Webhook.Port, msgs[0]))
	}
	switch c.Webhook.TLSMinVersion {
	case "1.2", "1.3":
	default:
		errs = append(errs, field.NotSupported(w.Child("tlsMinVersion"), c.Webhook.TLSMinVersion, TLSMinVersions))
	}
	if f := c.Webhook.ClientCAFile; f != "" && !filepath.IsAbs(f) {
		errs = append(errs, field.Invalid(w.Child("clientCAFile"), f, "must be an absolute path"))
	}
	errs = append(errs, validateBindAddress(field.NewPath("metrics", "bindAddress"), c.Metrics.BindAddress)...)
	errs = append(errs, validateClientCAFile(&c.Metrics, field.NewPath("metrics", "clientCAFile"))...)
	errs = append(errs, validateBindAddress(field.NewPath("health", "bindAddress"), c.Health.BindAddress)...)
	if d := c.ShutdownGracePeriod.Duration; d < 0 {
		errs = append(errs, field.Invalid(field.NewPath("shutdownGracePeriod"), d.String(), "must not be negative"))
	}
	if d := c.DrainPeriod.Duration; d < 0 {
		errs = append(errs, field.Invalid(field.NewPath("drainPeriod"), d.String(), "must not be negative"))
	}

	in := field.NewPath("injection")
	for i, ns := range c.Injection.ExcludedNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, field.Invalid(in.Child("excludedNamespaces").Index(i), ns, msgs[0]))
		}
	}
	if d := c.Injection.NamespaceCacheWait.Duration; !validCacheWait(d) {
		errs = append(errs, field.Invalid(in.Child("namespaceCacheWait"), d.String(),
			"must be between 0s and 3s, inside the 5s webhook timeout"))
	}
	tr := in.Child("trustedRequesters")
	for i, p := range c.Injection.TrustedRequesters.UsernamePrefixes {
		if len(p) < len("system:") {
			errs = append(errs, field.Invalid(tr.Child("usernamePrefixes").Index(i), p,
				"must be at least 7 characters; a short prefix trusts almost everyone"))
		}
	}
	errs = append(errs, validateInjection(&c.Injection, in)...)
	if d := c.Policy.EvaluationTimeout.Duration; !validEvaluationTimeout(d) {
		errs = append(errs, field.Invalid(field.NewPath("policy", "evaluationTimeout"), d.String(),
			"must be more than 0s and at most 4s, inside the 5s webhook timeout"))
	}
	errs = append(errs, validateExceptions(&c.Policy.Exceptions, field.NewPath("policy", "exceptions"))...)
	if q := c.Policy.DecisionCache.MaxBytes; q.Sign() < 0 || q.Cmp(*resource.NewQuantity(MaxDecisionCacheBytes, resource.BinarySI)) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("policy", "decisionCache", "maxBytes"), q.String(),
			"must be between 0 (off) and 1Gi"))
	}
	errs = append(errs, validateBudget(c)...)
	errs = append(errs, validateCertificates(&c.Certificates, field.NewPath("certificates"))...)
	errs = append(errs, validateController(&c.Controller, field.NewPath("controller"))...)
	errs = append(errs, validateAudit(&c.Audit, field.NewPath("audit"))...)
	return errs
}

// WebhookTimeout is the timeoutSeconds of every modelgate webhook
// (config/webhook): past it the API server gives up on the call and applies
// the failure policy.
const WebhookTimeout = 5 * time.Second

// reviewOverhead is what a review needs besides the namespace-cache wait
// and the policies' evaluation: the network both ways, reading and
// decoding the request and writing the answer (milliseconds), with room
// for a busy replica.
const reviewOverhead = 500 * time.Millisecond

// validCacheWait is the range of injection.namespaceCacheWait on its own.
func validCacheWait(d time.Duration) bool { return d >= 0 && d <= 3*time.Second }

// validEvaluationTimeout is the range of policy.evaluationTimeout on its
// own.
func validEvaluationTimeout(d time.Duration) bool { return d > 0 && d <= 4*time.Second }

// validateBudget checks that the longest review fits the webhook timeout:
// a validating review may wait for the namespace cache and then evaluate
// the policies, one after the other.
func validateBudget(c *Configuration) field.ErrorList {
	wait, eval := c.Injection.NamespaceCacheWait.Duration, c.Policy.EvaluationTimeout.Duration
	if !validCacheWait(wait) || !validEvaluationTimeout(eval) || wait+eval+reviewOverhead <= WebhookTimeout {
		return nil // each out of its own range is reported on its own
	}
	return field.ErrorList{field.Invalid(field.NewPath("policy", "evaluationTimeout"), eval.String(), fmt.Sprintf(
		"injection.namespaceCacheWait (%s) + policy.evaluationTimeout (%s) + %s for the rest of a review = %s, "+
			"over the webhooks' timeoutSeconds (%s): the API server would give up on the review first; lower either",
		wait, eval, reviewOverhead, wait+eval+reviewOverhead, WebhookTimeout))}
}

// validateClientCAFile checks metrics.clientCAFile: an absolute path, and
// only where the metrics are served over HTTPS, where a client certificate
// can be presented.
func validateClientCAFile(m *MetricsEndpoint, p *field.Path) field.ErrorList {
	switch {
	case m.ClientCAFile == "":
		return nil
	case m.Secure != nil && !*m.Secure:
		return field.ErrorList{field.Invalid(p, m.ClientCAFile,
			"must be empty when metrics.secure is false: client certificates are only checked over HTTPS")}
	case !filepath.IsAbs(m.ClientCAFile):
		return field.ErrorList{field.Invalid(p, m.ClientCAFile, "must be an absolute path")}
	}
	return nil
}

func validateBindAddress(p *field.Path, addr string) field.ErrorList {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return field.ErrorList{field.Invalid(p, addr, `must be host:port, ":port" or "0" to disable`)}
	}
	n, err := strconv.Atoi(port)
	if err != nil || len(validation.IsValidPortNum(n)) > 0 {
		return field.ErrorList{field.Invalid(p, addr, "must have a port between 1 and 65535")}
	}
	return nil
}

// validateExceptions checks the bounds of WorkloadPolicyExceptions.
func validateExceptions(ex *Exceptions, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := ex.MaxDuration; d != nil && (d.Duration < time.Hour || d.Duration > 365*24*time.Hour) {
		errs = append(errs, field.Invalid(p.Child("maxDuration"), d.Duration.String(), "must be between 1h and 8760h (a year)"))
	}
	if d := ex.ClockSkew; d != nil && (d.Duration < 0 || d.Duration > 10*time.Minute) {
		errs = append(errs, field.Invalid(p.Child("clockSkew"), d.Duration.String(), "must be between 0s and 10m"))
	}
	return errs
}

// validateAudit checks the periodic audit's settings.
func validateAudit(a *Audit, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.Interval != nil && a.Interval.Duration < time.Minute {
		errs = append(errs, field.Invalid(p.Child("interval"), a.Interval.Duration.String(),
			"must be at least 1m: each pass lists every workload of the cluster"))
	}
	if a.ObjectsPerSecond < 0 || a.ObjectsPerSecond > 10000 {
		errs = append(errs, field.Invalid(p.Child("objectsPerSecond"), a.ObjectsPerSecond, "must be between 1 and 10000"))
	}
	if a.MaxResultsPerReport < 0 || a.MaxResultsPerReport > 5000 {
		errs = append(errs, field.Invalid(p.Child("maxResultsPerReport"), a.MaxResultsPerReport,
			"must be between 1 and 5000: a PolicyReport must stay well under etcd's object size limit"))
	}
	seen := map[string]bool{}
	for i, r := range a.Reports {
		switch {
		case r != ReportsWGPolicy && r != ReportsOpenReports:
			errs = append(errs, field.NotSupported(p.Child("reports").Index(i), r, []string{ReportsWGPolicy, ReportsOpenReports}))
		case seen[r]:
			errs = append(errs, field.Duplicate(p.Child("reports").Index(i), r))
		}
		seen[r] = true
	}
	return errs
}
