package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/modelgate/modelgate/certs"
)

// clientCertificate is a client certificate ca signed for cn, in the
// group scrapers, issued at issued for an hour.
func clientCertificate(t *testing.T, ca *certs.KeyPair, cn string, issued time.Time) *x509.Certificate {
	t.Helper()
	kp, err := certs.NewClient(ca, cn, []string{"scrapers"}, issued, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return kp.Cert
}

// TestGuardMetrics: the answers of the metrics filter, with the
// apiserver library's client-certificate authenticator as the filter
// builds it (TokenReviews stubbed where a case needs them): a certificate
// that does not verify is the caller's fault (401), a failing
// TokenReview or SubjectAccessReview is not (500, as controller-runtime's
// filter answers).
func TestGuardMetrics(t *testing.T) {
	now := time.Now()
	ca, err := certs.NewCA("metrics-client-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("another-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := dynamiccertificates.NewStaticCAContent("metrics-client-ca", ca.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	x509Only, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                          &apiserver.AnonymousAuthConfig{Enabled: false},
		ClientCertificateCAContentProvider: bundle,
	}.New()
	if err != nil {
		t.Fatal(err)
	}
	errTokenReview := errors.New("the API server did not answer the TokenReview")
	tokenReviewFails := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return nil, false, errTokenReview
	})
	allowScraper := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "scraper" && a.GetVerb() == "get" && a.GetPath() == "/metrics" && !a.IsResourceRequest() {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "not bound", nil
	})
	authorizerFails := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", errors.New("the API server did not answer the SubjectAccessReview")
	})
	for name, tc := range map[string]struct {
		authn authenticator.Request
		authz authorizer.Authorizer
		cert  *x509.Certificate
		want  int
	}{
		"the CA's certificate, allowed":     {cert: clientCertificate(t, ca, "scraper", now.Add(-time.Minute)), want: http.StatusOK},
		"the CA's certificate, not allowed": {cert: clientCertificate(t, ca, "stranger", now.Add(-time.Minute)), want: http.StatusForbidden},
		"another CA's certificate":          {cert: clientCertificate(t, other, "scraper", now.Add(-time.Minute)), want: http.StatusUnauthorized},
		"the CA's certificate, expired":     {cert: clientCertificate(t, ca, "scraper", now.Add(-2*time.Hour)), want: http.StatusUnauthorized},
		"no credentials":                    {want: http.StatusUnauthorized},
		"the SubjectAccessReview fails":     {authz: authorizerFails, cert: clientCertificate(t, ca, "scraper", now.Add(-time.Minute)), want: http.StatusInternalServerError},
		"the TokenReview fails":             {authn: tokenReviewFails, want: http.StatusInternalServerError},
		"another CA's certificate and TokenReview fails": {
			authn: union.New(x509Only, tokenReviewFails), cert: clientCertificate(t, other, "scraper", now.Add(-time.Minute)),
			want: http.StatusInternalServerError,
		},
	} {
		t.Run(name, func(t *testing.T) {
			authn, authz := tc.authn, tc.authz
			if authn == nil {
				authn = x509Only
			}
			if authz == nil {
				authz = allowScraper
			}
			served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.TLS = &tls.ConnectionState{}
			if tc.cert != nil {
				req.TLS.PeerCertificates = []*x509.Certificate{tc.cert}
			}
			rec := httptest.NewRecorder()
			guardMetrics(logr.Discard(), authn, authz, served).ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("status %d (%q), want %d", rec.Code, rec.Body.String(), tc.want)
			}
			if got := rec.Body.String() == "metrics"; got != (tc.want == http.StatusOK) {
				t.Errorf("metrics served = %v with status %d", got, rec.Code)
			}
		})
	}
}
