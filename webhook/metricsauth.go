package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// metricsAuth decides who gets the secure metrics. It does what the
// kubebuilder scaffold's filter (controller-runtime's
// filters.WithAuthenticationAndAuthorization) does, with its settings: a
// bearer token is authenticated by the API server (TokenReview), and the
// caller must be allowed to get the path (SubjectAccessReview, the
// ClusterRole modelgate-metrics-reader). With metrics.clientCAFile it also
// takes a client certificate that CA signed, as kube-apiserver's
// --client-ca-file does: the user is the certificate's common name, its
// groups the certificate's organizations.
type metricsAuth struct {
	// clientCA is metrics.clientCAFile's bundle, read again when the file
	// changes; nil takes bearer tokens alone.
	clientCA *dynamiccertificates.DynamicFileCAContent
}

var _ manager.LeaderElectionRunnable = (*metricsAuth)(nil)

// clientCAName names metrics.clientCAFile's bundle in the logs of the
// Kubernetes code that reloads it.
const clientCAName = "metrics-client-ca"

// newMetricsAuth reads metrics.clientCAFile, if set.
func newMetricsAuth(m config.MetricsEndpoint) (*metricsAuth, error) {
	a := &metricsAuth{}
	if m.ClientCAFile == "" {
		return a, nil
	}
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile(clientCAName, m.ClientCAFile)
	if err != nil {
		return nil, fmt.Errorf("metrics.clientCAFile %s: %w", m.ClientCAFile, err)
	}
	a.clientCA = ca
	return a, nil
}

// requestClientCertificate asks callers for a client certificate without
// requiring one (a bearer token will do) or checking it in the handshake:
// the authenticator verifies its chain against the current bundle.
func requestClientCertificate(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }

// Start reads metrics.clientCAFile again whenever it changes, until ctx
// ends: a rotated CA is trusted without a restart. It runs on every
// replica, as the metrics server does.
func (a *metricsAuth) Start(ctx context.Context) error {
	if a.clientCA != nil {
		a.clientCA.Run(ctx, 1)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (*metricsAuth) NeedLeaderElection() bool { return false }

// webhookRetryBackoff is how the TokenReview and SubjectAccessReview
// clients retry, as controller-runtime's filter (and the apiserver
// library's defaults) do.
func webhookRetryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
}

// filter is the metrics server's FilterProvider.
func (a *metricsAuth) filter(rc *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1.NewForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the TokenReview client: %w", err)
	}
	authz, err := authorizationv1.NewForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the SubjectAccessReview client: %w", err)
	}
	authnConfig := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      webhookRetryBackoff(),
	}
	if a.clientCA != nil {
		authnConfig.ClientCertificateCAContentProvider = a.clientCA
	}
	authenticate, _, err := authnConfig.New()
	if err != nil {
		return nil, fmt.Errorf("creating the metrics authenticator: %w", err)
	}
	authorize, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       webhookRetryBackoff(),
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the metrics authorizer: %w", err)
	}
	return func(log logr.Logger, handler http.Handler) (http.Handler, error) {
		return guardMetrics(log, authenticate, authorize, handler), nil
	}, nil
}

// guardMetrics serves handler to the callers authenticate knows and
// authorize allows to use the request's verb on its path. Its answers are
// controller-runtime's filter's, but for a client certificate that does
// not verify: 401, as for a caller without credentials, where that filter
// answers every authentication error with 500.
func guardMetrics(log logr.Logger, authenticate authenticator.Request, authorize authorizer.Authorizer, handler http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		res, ok, err := authenticate.AuthenticateRequest(req)
		switch {
		case err != nil && unverifiedCertificate(err):
			// Not the error: it describes the certificate.
			log.V(4).Info("Authentication failed: the client certificate does not verify against metrics.clientCAFile")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		case err != nil:
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		case !ok:
			log.V(4).Info("Authentication failed")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attributes := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
		decision, reason, err := authorize.Authorize(req.Context(), attributes)
		if err != nil {
			msg := fmt.Sprintf("Authorization for user %s failed", res.User.GetName())
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			msg := fmt.Sprintf("Authorization denied for user %s", res.User.GetName())
			log.V(4).Info(msg, "reason", reason)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

// unverifiedCertificate reports whether every error in err is a client
// certificate's chain failing to verify (an unknown CA, expired, not for
// client authentication): the caller's fault, where an error of the
// TokenReview is not (or not only).
func unverifiedCertificate(err error) bool {
	if agg, ok := errors.AsType[utilerrors.Aggregate](err); ok {
		for _, e := range agg.Errors() {
			if !unverifiedCertificate(e) {
				return false
			}
		}
		return len(agg.Errors()) > 0
	}
	_, unknown := errors.AsType[x509.UnknownAuthorityError](err)
	_, invalid := errors.AsType[x509.CertificateInvalidError](err)
	return unknown || invalid
}
