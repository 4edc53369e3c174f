package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The permissions self mode needs, and nothing more: the one Secret in
// modelgate's namespace (create cannot be narrowed to a name), and get and
// update on the named webhook configurations and CRD to set their CA
// bundle. docs/operations.md lists them with the reasons.
//
// +kubebuilder:rbac:groups="",namespace=modelgate-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=modelgate-system,resources=secrets,verbs=get;update,resourceNames=modelgate-webhook-tls
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;update,resourceNames=modelgate-mutating
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=modelgate-validating
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;update,resourceNames=aiinferences.serving.modelgate.io

// Targets are the objects whose CA bundle the rotator keeps.
type Targets struct {
	Mutating, Validating, CRDs []string
}

// Rotator keeps the self-managed certificates: it creates and rotates them
// in the Secret, injects the CA bundle into the Targets, and serves the
// Secret's current serving certificate through GetCertificate. Every
// replica runs one; none needs to lead.
type Rotator struct {
	// Client writes the Secret and the targets; Reader reads them from the
	// API server (not a cache, so that a replica never acts on an old
	// Secret).
	Client client.Client
	Reader client.Reader
	// Namespace and SecretName locate the Secret.
	Namespace, SecretName string
	Options               Options
	Targets               Targets
	// Interval is how often the Secret is read and checked; a failed
	// check is retried sooner.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnChange, when set, is told of every step this replica took.
	OnChange func(Step)

	cert    atomic.Pointer[tls.Certificate]
	leaf    atomic.Pointer[x509.Certificate]
	trusted atomic.Bool
}

var (
	_ manager.Runnable               = (*Rotator)(nil)
	_ manager.LeaderElectionRunnable = (*Rotator)(nil)
)

// ErrNoCertificate is returned by GetCertificate before the first
// certificate is loaded, and by Ready until it is trusted.
var ErrNoCertificate = errors.New("no serving certificate yet")

// errNotTrusted is Ready's answer while the bundle is not injected.
var errNotTrusted = errors.New("the served certificate is not yet trusted by the injected CA bundle")

// GetCertificate serves the current serving certificate (tls.Config's
// hook): a rotation takes effect at the next TLS handshake.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.cert.Load(); c != nil {
		return c, nil
	}
	return nil, ErrNoCertificate
}

// NotAfter is when the served certificate expires (zero before one).
func (r *Rotator) NotAfter() time.Time {
	if l := r.leaf.Load(); l != nil {
		return l.NotAfter
	}
	return time.Time{}
}

// Ready is a readiness check: it passes once the served certificate chains
// to the CA bundle injected into every target.
func (r *Rotator) Ready(*http.Request) error {
	switch {
	case r.cert.Load() == nil:
		return ErrNoCertificate
	case !r.trusted.Load():
		return errNotTrusted
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica runs its rotator.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it reconciles at once, then every
// Interval (a second after a failure), until ctx is done.
func (r *Rotator) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("certificates")
	ctx = logr.NewContext(ctx, log)
	for {
		wait := r.Interval
		if err := r.Reconcile(ctx); err != nil {
			log.Info("certificate check failed; retrying", "error", err.Error())
			wait = min(time.Second, r.Interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Reconcile brings the Secret and the targets up to date once, then serves
// the Secret's serving certificate. The order is what keeps rotation safe:
// a new CA is written and injected before any certificate it signs is, and
// a working serving certificate is never replaced in the check that had
// to change a CA bundle (however old the CA is, for example after a time
// when injection failed): the next check, an Interval later, does it.
func (r *Rotator) Reconcile(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	secret, state, err := r.read(ctx)
	if err != nil {
		return err
	}
	now := r.now()
	if step, why := NextStep(state, now, r.Options); step == StepNewCA {
		if secret, state, err = r.take(ctx, secret, state, step, now); err != nil {
			return err
		}
		log.Info("created a CA", "reason", why, "notAfter", state.CA.Cert.NotAfter)
	}
	injected, err := r.inject(ctx, state.Bundle, now)
	if err != nil {
		r.trusted.Store(false)
		return err
	}
	// A bundle changed in this check: let API servers see it before a
	// working certificate is replaced.
	wait := injected && state.Serving.Valid(now)
	if step, why := NextStep(state, now, r.Options); step == StepNewServing && !wait {
		if _, state, err = r.take(ctx, secret, state, step, now); err != nil {
			return err
		}
		log.Info("issued a serving certificate", "reason", why, "notAfter", state.Serving.Cert.NotAfter)
	}
	return r.serve(state)
}

func (r *Rotator) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// read returns the Secret (nil when there is none) and its state.
func (r *Rotator) read(ctx context.Context) (*corev1.Secret, *State, error) {
	s := &corev1.Secret{}
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.SecretName}, s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &State{}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading Secret %s/%s: %w", r.Namespace, r.SecretName, err)
	}
	return s, ReadState(s.Data), nil
}

// take applies the step and writes the Secret, creating it or updating
// the version read. Losing a race (the Secret was created or changed
// meanwhile) is an error: the next reconcile adopts the winner's Secret.
func (r *Rotator) take(ctx context.Context, secret *corev1.Secret, state *State, step Step, now time.Time) (*corev1.Secret, *State, error) {
	next, err := Apply(state, step, now, r.Options)
	if err != nil {
		return nil, nil, err
	}
	if secret == nil {
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.SecretName, Labels: map[string]string{
				"app.kubernetes.io/name": "modelgate", "app.kubernetes.io/managed-by": "modelgate",
			}},
			Type: corev1.SecretTypeOpaque,
			Data: next.Data(),
		}
		err = r.Client.Create(ctx, secret)
	} else {
		secret = secret.DeepCopy()
		secret.Data = next.Data()
		err = r.Client.Update(ctx, secret)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("writing Secret %s/%s (%s): %w", r.Namespace, r.SecretName, step, err)
	}
	if r.OnChange != nil {
		r.OnChange(step)
	}
	return secret, next, nil
}

// serve loads the state's serving certificate, if any, and records whether
// the bundle just injected trusts it.
func (r *Rotator) serve(state *State) error {
	if state.Serving == nil {
		r.trusted.Store(false)
		return errors.New("the Secret has no serving certificate yet")
	}
	if l := r.leaf.Load(); l == nil || !l.Equal(state.Serving.Cert) {
		pair, err := tls.X509KeyPair(state.Serving.CertPEM, state.Serving.KeyPEM)
		if err != nil {
			return fmt.Errorf("loading the serving certificate: %w", err)
		}
		pair.Leaf = state.Serving.Cert
		r.cert.Store(&pair)
		r.leaf.Store(state.Serving.Cert)
	}
	roots := x509.NewCertPool()
	for _, c := range state.Bundle {
		roots.AddCert(c)
	}
	_, err := state.Serving.Cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: r.now()})
	r.trusted.Store(err == nil)
	if err != nil {
		return fmt.Errorf("the serving certificate does not verify against the CA bundle: %w", err)
	}
	return nil
}
