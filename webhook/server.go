// Package webhook wires modelgate's admission handlers into a
// controller-runtime manager: TLS serving with certificate hot reload,
// health and readiness checks, metrics, and the caches the handlers read
// instead of calling the API server.
package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/api/install"
	"github.com/modelgate/modelgate/controller/claimtemplates"
	"github.com/modelgate/modelgate/controller/exceptionsource"
	"github.com/modelgate/modelgate/controller/policysource"
	"github.com/modelgate/modelgate/internal/runnable"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
	policyview "github.com/modelgate/modelgate/policies/workload"
)

// namespaceCachePoll is how often a review looks again for a namespace that
// has not reached the cache yet.
const namespaceCachePoll = 20 * time.Millisecond

// NewManager builds a manager that serves modelgate's webhooks as the
// configuration says. Start it with Start; it runs until ctx is cancelled,
// drains for cfg.DrainPeriod (drain.go), then lets in-flight reviews finish
// within cfg.ShutdownGracePeriod.
func NewManager(rc *rest.Config, cfg *config.Configuration, extensions ...Extension) (manager.Manager, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	tlsOpts := []func(*tls.Config){TLSOptions(cfg.Webhook)}
	rotator := newRotator(cfg)
	if rotator != nil {
		tlsOpts = append(tlsOpts, servingCertificate(rotator))
	}
	auth, err := newClientAuth(cfg.Webhook, time.Now())
	if err != nil {
		return nil, err
	}
	if auth != nil {
		tlsOpts = append(tlsOpts, auth.tlsOption)
	}
	d := &drain{period: cfg.DrainPeriod.Duration}
	server := withClientAuth(newWebhookServer(cfg, d, tlsOpts), auth, cfg.Webhook)
	metrics, clientCA, err := metricsOptions(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	elect := (cfg.ControllerEnabled() || cfg.AuditEnabled()) && (cfg.Controller.LeaderElection == nil || *cfg.Controller.LeaderElection)
	mgr, err := manager.New(rc, manager.Options{
		Scheme:                  scheme,
		WebhookServer:           server,
		Metrics:                 metrics,
		HealthProbeBindAddress:  cfg.Health.BindAddress,
		GracefulShutdownTimeout: ptr.To(cfg.ShutdownGracePeriod.Duration),
		Cache:                   CacheOptions(),
		// Every replica serves every request on its own; only the
		// AIInference controller runs on one replica at a time.
		LeaderElection:                elect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       cfg.Namespace,
		LeaderElectionReleaseOnCancel: true,
		// Runnables (the certificate rotator, the policy directory) log
		// through their context's logger.
		BaseContext: func() context.Context {
			return logr.NewContext(context.Background(), logf.Log.WithName("modelgate"))
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if rotator != nil {
		if err := addRotator(mgr, rotator); err != nil {
			return nil, err
		}
	}
	if err := addClientAuth(mgr, auth); err != nil {
		return nil, err
	}
	if clientCA != nil {
		if err := mgr.Add(clientCA); err != nil {
			return nil, fmt.Errorf("adding the metrics client CA watch: %w", err)
		}
	}
	if cfg.RecordKey == nil {
		direct, err := client.New(rc, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("creating a client for the record key: %w", err)
		}
		// A copy: the caller's Configuration stays as it was loaded.
		withKey := *cfg
		if withKey.RecordKey, err = loadRecordKey(direct, cfg.Namespace); err != nil {
			return nil, err
		}
		cfg = &withKey
	}
	if err := Register(mgr, cfg, extensions...); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("shutdown", d.check); err != nil {
		return nil, fmt.Errorf("adding the shutdown readiness check: %w", err)
	}
	return drainingManager{Manager: mgr, drain: d}, nil
}

// newWebhookServer is the HTTPS server of the admission webhooks: the
// configured address, certificate files and TLS settings, behind the
// request limits (limits.go) and the drain (drain.go).
func newWebhookServer(cfg *config.Configuration, d *drain, tlsOpts []func(*tls.Config)) crwebhook.Server {
	server := crwebhook.NewServer(crwebhook.Options{
		Host:     cfg.Webhook.Host,
		Port:     int(cfg.Webhook.Port),
		CertDir:  cfg.Webhook.CertDir,
		CertName: cfg.Webhook.CertName,
		KeyName:  cfg.Webhook.KeyName,
		TLSOpts:  tlsOpts,
	})
	return limitedServer{Server: server, limiter: NewLimiter(DefaultLimits()), drain: d}
}

// registerWorkloads registers the workload webhooks: /mutate and
// /validate.
func registerWorkloads(srv crwebhook.Server, cfg *config.Configuration, ns NamespaceLabeler, engine *policies.Engine, pm *PolicyMetrics, claims policyview.ClaimResolver) {
	srv.Register(MutatePath, newReviewHTTP(NewMutating(cfg, ns, NewMetrics(defaultRegistry))))
	v := NewValidating(cfg, engine, ns, pm)
	v.SetClaims(claims)
	srv.Register(ValidatePath, newReviewHTTP(v))
}

// NewWorkloadServer is the workload webhooks' HTTPS server (/mutate and
// /validate) as serve wires it: the same TLS settings, request limits,
// drain, handlers, metrics and logging, with the namespace labels from ns
// and the given policies in force instead of a manager's cache and
// WorkloadPolicy controller. make bench-http serves with it; Start it
// with Start.
func NewWorkloadServer(cfg *config.Configuration, ns NamespaceLabeler, compiled []*policies.Compiled) crwebhook.Server {
	srv := newWebhookServer(cfg, &drain{period: cfg.DrainPeriod.Duration}, []func(*tls.Config){TLSOptions(cfg.Webhook)})
	pm := NewPolicyMetrics(defaultRegistry)
	engine := newEngine(cfg, pm)
	engine.Swap(policies.NewSet(compiled...))
	registerWorkloads(srv, cfg, ns, engine, pm, nil)
	return srv
}

// newEngine is the policy engine serve evaluates with: the configured
// evaluation timeout and decision cache, observed by the policy metrics.
func newEngine(cfg *config.Configuration, pm *PolicyMetrics) *policies.Engine {
	return policies.NewEngine(policies.Options{Timeout: cfg.Policy.EvaluationTimeout.Duration, Observer: pm, Cache: newDecisionCache(cfg)})
}

// LeaderElectionID is the Lease, in modelgate's namespace, whose holder
// runs the AIInference controller.
const LeaderElectionID = "modelgate-aiinference"

// CacheOptions keep the cache small: managed fields dropped, and of the
// Deployments, Services, ReplicaSets and Pods (which the AIInference
// controller reads) only modelgate's children, labelled
// annotations.InferenceLabel. The webhooks read namespace metadata alone.
func CacheOptions() cache.Options {
	children := labels.NewSelector()
	if req, err := labels.NewRequirement(annotations.InferenceLabel, selection.Exists, nil); err == nil {
		children = children.Add(*req)
	}
	only := cache.ByObject{Label: children}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: only, &appsv1.ReplicaSet{}: only,
			&corev1.Service{}: only, &corev1.Pod{}: only,
			&resourcev1.ResourceClaim{}: claimCacheOptions(),
		},
	}
}

// NewScheme returns the scheme modelgate serves with: the Kubernetes types,
// CustomResourceDefinition (for CA injection into the conversion webhook)
// and every modelgate API version.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, install.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("building scheme: %w", err)
		}
	}
	return s, nil
}

// TLSOptions returns the serving TLS settings: the configured minimum
// version (1.2 by default) and HTTP/1.1 only unless HTTP/2 is enabled.
func TLSOptions(w config.WebhookServer) func(*tls.Config) {
	return func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		if w.TLSMinVersion == "1.3" {
			c.MinVersion = tls.VersionTLS13
		}
		if !w.EnableHTTP2 {
			c.NextProtos = []string{"http/1.1"}
		}
	}
}

// Parts are what the webhooks judge with, for the Extensions that judge
// alike (the audit).
type Parts struct {
	// Engine holds the policies in force.
	Engine *policies.Engine
	// Namespaces are the namespaces' labels, from the manager's cache.
	Namespaces NamespaceLabeler
	// Claims are the resource claim templates and claims, from the
	// manager's cache.
	Claims policyview.ClaimResolver
}

// Extension adds to the manager what lives outside this package, with the
// Configuration (its record key loaded) and the webhooks' Parts.
type Extension func(mgr manager.Manager, cfg *config.Configuration, parts Parts) error

// Register adds modelgate's handlers, controllers, checks and cache
// warm-up to mgr, then the extensions.
func Register(mgr manager.Manager, cfg *config.Configuration, extensions ...Extension) error {
	ns := &cachedNamespaces{
		reader: mgr.GetCache(),
		wait:   cfg.Injection.NamespaceCacheWait.Duration,
		poll:   namespaceCachePoll,
	}
	srv := mgr.GetWebhookServer()
	pm := NewPolicyMetrics(defaultRegistry)
	engine := newEngine(cfg, pm)
	registerLoaded(engine)
	store := policies.NewStore(engine)
	claims := &cachedClaims{reader: mgr.GetCache()}
	registerWorkloads(srv, cfg, ns, engine, pm, claims)
	srv.Register(ValidatePolicyPath, &admission.Webhook{
		Handler:      PolicyValidator{GPU: celform.KeysOf(cfg)},
		RecoverPanic: ptr.To(true),
	})
	if err := mgr.Add(runnable.EveryReplica(func(ctx context.Context) error {
		return claims.start(ctx, mgr.GetCache(), mgr.GetRESTMapper())
	})); err != nil {
		return fmt.Errorf("adding the resource claim cache: %w", err)
	}
	templates := &claimtemplates.Reconciler{Client: mgr.GetClient(), DRA: draOptions(&cfg.Injection.GPU.DRA), Seal: recordKey(cfg)}
	if err := templates.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := registerAIInference(mgr, cfg, engine, ns, pm); err != nil {
		return err
	}
	rec := &policysource.Reconciler{Client: mgr.GetClient(), Store: store, Metrics: pm}
	if err := rec.SetupWithManager(mgr); err != nil {
		return err
	}
	srv.Register(ValidateExceptionPath, &admission.Webhook{
		Handler:      &ExceptionValidator{Policies: mgr.GetCache(), Engine: engine, Config: cfg.Policy.Exceptions},
		RecoverPanic: ptr.To(true),
	})
	exRec := &exceptionsource.Reconciler{Client: mgr.GetClient(), Engine: engine, ClockSkew: cfg.Policy.Exceptions.ClockSkew.Duration}
	if err := exRec.SetupWithManager(mgr); err != nil {
		return err
	}
	if dir := cfg.Policy.Directory; dir != "" {
		ds := policies.NewDirSource(dir, store)
		ds.OnError = func(error) { pm.LoadFailed(policies.SourceDirectory) }
		// Load once before serving, so the directory's policies are in
		// force from the first review; Start watches for changes.
		ds.Load(logr.NewContext(context.Background(), mgr.GetLogger().WithName("policy-dir")))
		if err := mgr.Add(ds); err != nil {
			return fmt.Errorf("adding the policy directory source: %w", err)
		}
	}

	for _, ext := range extensions {
		if err := ext(mgr, cfg, Parts{Engine: engine, Namespaces: ns, Claims: claims}); err != nil {
			return err
		}
	}

	warm := &informerWarmup{}
	if err := mgr.Add(runnable.EveryReplica(func(ctx context.Context) error {
		return warm.start(ctx, mgr.GetCache())
	})); err != nil {
		return fmt.Errorf("adding namespace cache warm-up: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	for name, check := range map[string]healthz.Checker{
		"webhook-server":  srv.StartedChecker(),
		"namespace-cache": warm.checker,
		"policies":        rec.Checker,
		"exceptions":      exRec.Checker,
	} {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return fmt.Errorf("adding readiness check %s: %w", name, err)
		}
	}
	return nil
}

// registerLoaded serves modelgate_policies_loaded from the engine. The
// gauge is registered once per process; a second manager (tests) keeps the
// first one's.
func registerLoaded(e *policies.Engine) {
	loadedOnce.Do(func() {
		defaultRegistry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "modelgate_policies_loaded",
			Help: "Policies in force: compiled and evaluated by the validating webhook.",
		}, func() float64 { return float64(e.Set().Len()) }))
		defaultRegistry.MustRegister(&exceptionCollector{engine: e, now: time.Now})
	})
}

var loadedOnce sync.Once

// informerWarmup starts the namespace informer with the manager, instead
// of on the first review, and reports when it has synced.
type informerWarmup struct {
	informer atomic.Pointer[toolscache.InformerSynced]
}

var errNotSynced = errors.New("namespace cache has not synced yet")

func (w *informerWarmup) start(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, newNamespaceMeta(), cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("starting namespace informer: %w", err)
	}
	synced := toolscache.InformerSynced(inf.HasSynced)
	w.informer.Store(&synced)
	<-ctx.Done()
	return nil
}

func (w *informerWarmup) checker(_ *http.Request) error {
	synced := w.informer.Load()
	if synced == nil || !(*synced)() {
		return errNotSynced
	}
	return nil
}

// The secure metrics endpoint asks the API server who a scraper is and
// whether it may get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves the metrics as the kubebuilder scaffold does: over
// HTTPS (a self-signed certificate controller-runtime makes at start),
// with each request's bearer token checked by the API server, and with
// metrics.clientCAFile to callers with a client certificate that CA signed
// too (metricsauth.go). The runnable, nil without a CA file, reloads the
// file when it changes: add it to the manager.
func metricsOptions(m config.MetricsEndpoint) (metricsserver.Options, manager.Runnable, error) {
	o := metricsserver.Options{BindAddress: m.BindAddress}
	if m.BindAddress == "0" || (m.Secure != nil && !*m.Secure) {
		return o, nil, nil
	}
	auth, err := newMetricsAuth(m)
	if err != nil {
		return o, nil, err
	}
	o.SecureServing = true
	o.FilterProvider = auth.filter
	if auth.clientCA == nil {
		return o, nil, nil
	}
	o.TLSOpts = []func(*tls.Config){requestClientCertificate}
	return o, auth, nil
}
