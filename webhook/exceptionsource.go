package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicyexceptions/status,verbs=get;update;patch

// ExceptionReconciler keeps the engine's exceptions in step with the
// WorkloadPolicyException resources, and writes each one's status.state:
// Active, then Expired once its expiresAt has passed (it looks again at
// that moment). Whether an exception applies is decided at each review
// from its expiresAt, never from the status: an exception stops applying
// the moment it expires on every replica, whether or not this reconciler
// has run since.
//
// Every replica runs it, without leader election, as PolicyReconciler.
type ExceptionReconciler struct {
	// Client reads exceptions from the manager's cache and writes their
	// status.
	Client client.Client
	Engine *policies.Engine
	// ClockSkew is policy.exceptions.clockSkew (policies.NewExceptions).
	ClockSkew time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	loaded atomic.Bool
	// mu orders the rebuilds: each lists the cache and publishes, so the
	// last one published holds the latest list.
	mu sync.Mutex
}

// SetupWithManager registers the reconciler, and a runnable that loads
// every exception once the cache has synced (the readiness check passes
// only after that).
func (r *ExceptionReconciler) SetupWithManager(mgr manager.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("workloadpolicyexception").
		For(&policyv1.WorkloadPolicyException{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), SkipNameValidation: ptr.To(true)}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("creating the WorkloadPolicyException controller: %w", err)
	}
	return mgr.Add(everyReplica(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // stopping
		}
		n, err := r.rebuild(ctx)
		if err != nil {
			return err
		}
		r.loaded.Store(true)
		logf.FromContext(ctx).Info("loaded WorkloadPolicyExceptions", "loaded", n)
		<-ctx.Done()
		return nil
	}))
}

// Checker is a readiness check: ready once the exceptions that existed at
// start are loaded, so that no replica denies what one of them allows.
func (r *ExceptionReconciler) Checker(_ *http.Request) error {
	if !r.loaded.Load() {
		return errExceptionsNotLoaded
	}
	return nil
}

var errExceptionsNotLoaded = errors.New("WorkloadPolicyExceptions not loaded yet")

func (r *ExceptionReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// rebuild publishes every exception of the cache to the engine. An
// exception that cannot be converted (a label selector the API server let
// through but that does not parse) is left out and logged: it applies
// nowhere.
func (r *ExceptionReconciler) rebuild(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var list policyv1.WorkloadPolicyExceptionList
	if err := r.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("listing WorkloadPolicyExceptions: %w", err)
	}
	es := make([]*policies.Exception, 0, len(list.Items))
	for i := range list.Items {
		e, err := validators.ExceptionOf(&list.Items[i])
		if err != nil {
			logf.FromContext(ctx).Info("WorkloadPolicyException cannot be used; it applies nowhere",
				"namespace", list.Items[i].Namespace, "name", list.Items[i].Name, "error", err.Error())
			continue
		}
		es = append(es, e)
	}
	r.Engine.SetExceptions(policies.NewExceptions(r.ClockSkew, es...))
	return len(es), nil
}

// Reconcile implements reconcile.Reconciler.
func (r *ExceptionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if _, err := r.rebuild(ctx); err != nil {
		return ctrl.Result{}, err
	}
	ex := &policyv1.WorkloadPolicyException{}
	if err := r.Client.Get(ctx, req.NamespacedName, ex); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.now()
	x := r.Engine.Exceptions()
	e := &policies.Exception{ExpiresAt: ex.Spec.ExpiresAt.Time}
	state, after := policyv1.ExceptionExpired, time.Duration(0)
	if x.InForce(e, now) {
		// Looked at again when it expires (by this replica's clock, less
		// the skew allowed), a little after so that it has.
		state, after = policyv1.ExceptionActive, ex.Spec.ExpiresAt.Sub(now)-r.ClockSkew+time.Second
	}
	if ex.Status.State != state || ex.Status.ObservedGeneration != ex.Generation {
		ex.Status.State, ex.Status.ObservedGeneration = state, ex.Generation
		if err := r.Client.Status().Update(ctx, ex); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // another replica wrote it: look again.
			}
			return ctrl.Result{}, fmt.Errorf("updating the status of WorkloadPolicyException %s/%s: %w", ex.Namespace, ex.Name, err)
		}
	}
	return ctrl.Result{RequeueAfter: after}, nil
}
