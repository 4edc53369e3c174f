package certs

import (
	"fmt"
	"net"
	"slices"
	"time"
)

// Options are what the certificates are made for and how long they last.
type Options struct {
	// DNSNames and IPs are the serving certificate's subject alternative
	// names.
	DNSNames []string
	IPs      []net.IP
	// CALifetime and ServingLifetime are the validity of each certificate.
	CALifetime, ServingLifetime time.Duration
	// RenewBefore is how long before expiry the serving certificate is
	// replaced; the CA is replaced ServingLifetime+RenewBefore before its
	// expiry.
	RenewBefore time.Duration
	// InjectionGrace is how old a CA must be, in the injected bundle,
	// before a serving certificate it signs replaces a working one.
	InjectionGrace time.Duration
}

// Step is the one change the Secret needs next.
type Step int

// The steps, in the order they are taken.
const (
	// StepNone: the Secret is good.
	StepNone Step = iota
	// StepNewCA: create a CA and put it at the head of the bundle; the
	// serving certificate is left alone until the bundle is injected.
	StepNewCA
	// StepNewServing: issue a serving certificate from the current CA.
	StepNewServing
)

func (s Step) String() string {
	switch s {
	case StepNewCA:
		return "new CA"
	case StepNewServing:
		return "new serving certificate"
	default:
		return "none"
	}
}

// NextStep decides what the Secret needs at now, and why. It assumes the
// current bundle has been injected when it asks for StepNewServing: the
// caller injects first.
func NextStep(s *State, now time.Time, o Options) (Step, string) {
	switch {
	case s.CA == nil:
		return StepNewCA, "there is no CA"
	case !now.Before(s.CA.Cert.NotAfter.Add(-(o.ServingLifetime + o.RenewBefore))):
		return StepNewCA, fmt.Sprintf("the CA expires at %s", s.CA.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	sv := s.Serving
	if sv == nil || !now.Before(sv.Cert.NotAfter) {
		// Nothing that works would be replaced: no need to wait.
		return StepNewServing, "there is no valid serving certificate"
	}
	reason := ""
	switch {
	case sv.Cert.CheckSignatureFrom(s.CA.Cert) != nil:
		reason = "the serving certificate was signed by a previous CA"
	case !now.Before(sv.Cert.NotAfter.Add(-o.RenewBefore)):
		reason = fmt.Sprintf("the serving certificate expires at %s", sv.Cert.NotAfter.UTC().Format(time.RFC3339))
	case !sameNames(sv, o):
		reason = "the serving certificate's names changed"
	default:
		return StepNone, ""
	}
	// Replace a working certificate only once every API server can have
	// seen the CA that signs the new one.
	if now.Sub(s.CA.Cert.NotBefore.Add(clockSkew)) < o.InjectionGrace {
		return StepNone, reason + ", after the new CA's injection grace"
	}
	return StepNewServing, reason
}

// Apply takes a step at now and returns the new state; s is not changed.
func Apply(s *State, step Step, now time.Time, o Options) (*State, error) {
	switch step {
	case StepNewCA:
		ca, err := NewCA("modelgate-ca", now, o.CALifetime)
		if err != nil {
			return nil, err
		}
		return s.withCA(ca, now), nil
	case StepNewServing:
		sv, err := NewServing(s.CA, o.DNSNames, o.IPs, now, o.ServingLifetime)
		if err != nil {
			return nil, err
		}
		return &State{CA: s.CA, Bundle: s.Bundle, Serving: sv}, nil
	default:
		return s, nil
	}
}

func sameNames(kp *KeyPair, o Options) bool {
	if !slices.Equal(slices.Sorted(slices.Values(kp.Cert.DNSNames)), slices.Sorted(slices.Values(o.DNSNames))) {
		return false
	}
	have, want := make([]string, 0, len(kp.Cert.IPAddresses)), make([]string, 0, len(o.IPs))
	for _, ip := range kp.Cert.IPAddresses {
		have = append(have, ip.String())
	}
	for _, ip := range o.IPs {
		want = append(want, ip.String())
	}
	return slices.Equal(slices.Sorted(slices.Values(have)), slices.Sorted(slices.Values(want)))
}
