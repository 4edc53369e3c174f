package certs

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"
)

var (
	t0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts = Options{
		DNSNames:        []string{"modelgate-webhook.modelgate-system.svc"},
		IPs:             []net.IP{net.ParseIP("127.0.0.1")},
		CALifetime:      365 * 24 * time.Hour,
		ServingLifetime: 90 * 24 * time.Hour,
		RenewBefore:     30 * 24 * time.Hour,
		InjectionGrace:  time.Minute,
	}
)

func mustApply(t *testing.T, s *State, step Step, now time.Time, o Options) *State {
	t.Helper()
	next, err := Apply(s, step, now, o)
	if err != nil {
		t.Fatal(err)
	}
	return next
}

func TestNewCertificates(t *testing.T) {
	ca, err := NewCA("modelgate-ca", t0, opts.CALifetime)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.IsCA || ca.Cert.KeyUsage&x509.KeyUsageCertSign == 0 || !ca.Cert.NotAfter.Equal(t0.Add(opts.CALifetime)) {
		t.Errorf("CA: isCA %t usage %v notAfter %s", ca.Cert.IsCA, ca.Cert.KeyUsage, ca.Cert.NotAfter)
	}
	sv, err := NewServing(ca, opts.DNSNames, opts.IPs, t0, opts.ServingLifetime)
	if err != nil {
		t.Fatal(err)
	}
	c := sv.Cert
	if c.IsCA || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("serving usages: isCA %t ext %v usage %v", c.IsCA, c.ExtKeyUsage, c.KeyUsage)
	}
	if !slices.Equal(c.DNSNames, opts.DNSNames) || len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(opts.IPs[0]) {
		t.Errorf("SANs: %v %v", c.DNSNames, c.IPAddresses)
	}
	if !c.NotAfter.Equal(t0.Add(opts.ServingLifetime)) || !c.NotBefore.Equal(t0.Add(-clockSkew)) {
		t.Errorf("serving validity %s to %s", c.NotBefore, c.NotAfter)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool(ca.Cert), DNSName: opts.DNSNames[0], CurrentTime: t0}); err != nil {
		t.Errorf("serving does not verify against its CA: %v", err)
	}
	late, err := NewServing(ca, opts.DNSNames, nil, ca.Cert.NotAfter.Add(-time.Hour), opts.ServingLifetime)
	if err != nil {
		t.Fatal(err)
	}
	if !late.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("a serving certificate outlives its CA: %s > %s", late.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := NewServing(ca, nil, nil, t0, time.Hour); err == nil {
		t.Error("a serving certificate without names was issued")
	}
}

func TestNewClient(t *testing.T) {
	ca, err := NewCA("modelgate-ca", t0, opts.CALifetime)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := NewClient(ca, "scraper", []string{"team-a", "team-b"}, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.Cert
	if c.IsCA || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) || c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("client usages: isCA %t ext %v usage %v", c.IsCA, c.ExtKeyUsage, c.KeyUsage)
	}
	if c.Subject.CommonName != "scraper" || !slices.Equal(c.Subject.Organization, []string{"team-a", "team-b"}) {
		t.Errorf("subject %v: want CN scraper, O team-a and team-b (the user and groups Kubernetes reads)", c.Subject)
	}
	if !c.NotAfter.Equal(t0.Add(time.Hour)) || !c.NotBefore.Equal(t0.Add(-clockSkew)) {
		t.Errorf("client validity %s to %s", c.NotBefore, c.NotAfter)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool(ca.Cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: t0}); err != nil {
		t.Errorf("client does not verify against its CA: %v", err)
	}
	if _, err := ParseKeyPair(cl.CertPEM, cl.KeyPEM); err != nil {
		t.Errorf("PEM: %v", err)
	}
	late, err := NewClient(ca, "scraper", nil, ca.Cert.NotAfter.Add(-time.Minute), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !late.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("a client certificate outlives its CA: %s > %s", late.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := NewClient(ca, "", nil, t0, time.Hour); err == nil {
		t.Error("a client certificate without a user was issued")
	}
}

func TestStateRoundTrip(t *testing.T) {
	s := mustApply(t, &State{}, StepNewCA, t0, opts)
	s = mustApply(t, s, StepNewServing, t0, opts)
	got := ReadState(s.Data())
	if got.CA == nil || !got.CA.Cert.Equal(s.CA.Cert) || got.Serving == nil || !got.Serving.Cert.Equal(s.Serving.Cert) || len(got.Bundle) != 1 {
		t.Fatalf("state did not survive the Secret: %+v", got)
	}
	broken := s.Data()
	broken[KeyCAKey] = []byte("not a key")
	broken[KeyServingKey] = s.CA.KeyPEM // another key: does not match
	if got := ReadState(broken); got.CA != nil || got.Serving != nil || len(got.Bundle) != 1 {
		t.Errorf("a broken Secret should read as no CA and no serving certificate, keeping the bundle: %+v", got)
	}
}

func TestNextStep(t *testing.T) {
	fresh := mustApply(t, mustApply(t, &State{}, StepNewCA, t0, opts), StepNewServing, t0, opts)
	// A serving certificate issued on day 190, then a new CA on day 200.
	rolled := mustApply(t, mustApply(t, fresh, StepNewServing, t0.Add(190*24*time.Hour), opts), StepNewCA, t0.Add(200*24*time.Hour), opts)
	renamed := opts
	renamed.DNSNames = []string{"other.modelgate-system.svc"}
	tests := map[string]struct {
		state *State
		at    time.Time
		o     Options
		want  Step
	}{
		"empty Secret":                       {state: &State{}, at: t0, o: opts, want: StepNewCA},
		"CA without serving":                 {state: mustApply(t, &State{}, StepNewCA, t0, opts), at: t0, o: opts, want: StepNewServing},
		"all fresh":                          {state: fresh, at: t0.Add(time.Hour), o: opts, want: StepNone},
		"serving inside renewBefore":         {state: fresh, at: t0.Add(61 * 24 * time.Hour), o: opts, want: StepNewServing},
		"serving expired":                    {state: fresh, at: t0.Add(91 * 24 * time.Hour), o: opts, want: StepNewServing},
		"CA inside servingLifetime+renew":    {state: fresh, at: t0.Add(246 * 24 * time.Hour), o: opts, want: StepNewCA},
		"names changed":                      {state: fresh, at: t0.Add(time.Hour), o: renamed, want: StepNewServing},
		"new CA, within the injection grace": {state: rolled, at: t0.Add(200*24*time.Hour + 30*time.Second), o: opts, want: StepNone},
		"new CA, after the injection grace":  {state: rolled, at: t0.Add(200*24*time.Hour + 2*time.Minute), o: opts, want: StepNewServing},
		"expired serving under a young CA":   {state: &State{CA: rolled.CA, Bundle: rolled.Bundle}, at: t0.Add(200 * 24 * time.Hour), o: opts, want: StepNewServing},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got, why := NextStep(tc.state, tc.at, tc.o); got != tc.want {
				t.Errorf("NextStep = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
	if len(rolled.Bundle) != 2 || !rolled.Bundle[0].Equal(rolled.CA.Cert) || !rolled.Bundle[1].Equal(fresh.CA.Cert) {
		t.Errorf("after a new CA the bundle is [new, old], got %d certificates", len(rolled.Bundle))
	}
}

// TestRotationNeverServesUntrusted runs the rotation over three simulated
// years, reconciling every three hours as the rotator does (new CA, inject, new
// serving certificate), and checks at every instant that the certificate
// served verifies against the bundle the API server had been given at
// least InjectionGrace earlier.
func TestRotationNeverServesUntrusted(t *testing.T) {
	s := &State{}
	type injection struct {
		at     time.Time
		bundle []*x509.Certificate
	}
	var injected []injection
	cas, servings := 0, 0
	for now := t0; now.Before(t0.Add(3 * 365 * 24 * time.Hour)); now = now.Add(3 * time.Hour) {
		if step, _ := NextStep(s, now, opts); step == StepNewCA {
			s = mustApply(t, s, step, now, opts)
			cas++
		}
		injected = append(injected, injection{at: now, bundle: MergeBundles(s.Bundle, nil, now)})
		if step, _ := NextStep(s, now, opts); step == StepNewServing {
			s = mustApply(t, s, step, now, opts)
			servings++
		}
		if now.Equal(t0) {
			continue // first install: nothing was trusted before
		}
		// What every API server trusts: the newest bundle injected at
		// least InjectionGrace ago (here, the previous reconcile's).
		seen := injected[len(injected)-2].bundle
		if _, err := s.Serving.Cert.Verify(x509.VerifyOptions{Roots: pool(seen...), CurrentTime: now}); err != nil {
			t.Fatalf("at %s the served certificate is not trusted by the bundle seen: %v", now, err)
		}
	}
	if cas < 3 || servings < 12 {
		t.Errorf("three years took %d CAs and %d serving certificates; want at least 3 and 12", cas, servings)
	}
}

func TestMergeBundles(t *testing.T) {
	a, _ := NewCA("a", t0, time.Hour)
	b, _ := NewCA("b", t0, 2*time.Hour)
	got := MergeBundles([]*x509.Certificate{a.Cert}, []*x509.Certificate{b.Cert, a.Cert}, t0)
	if len(got) != 2 || !got[0].Equal(a.Cert) || !got[1].Equal(b.Cert) {
		t.Errorf("merge of [a] and [b a] = %d certificates, want [a b]", len(got))
	}
	if got := MergeBundles([]*x509.Certificate{a.Cert}, []*x509.Certificate{b.Cert}, t0.Add(90*time.Minute)); len(got) != 1 || !got[0].Equal(b.Cert) {
		t.Errorf("an expired CA stayed in the bundle")
	}
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}
