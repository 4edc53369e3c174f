// Package exceptionsource is the controller that keeps the policy engine's
// exceptions in step with the WorkloadPolicyException resources and writes
// their status.
package exceptionsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/internal/runnable"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicyexceptions/status,verbs=get;update;patch

// Reconciler keeps the engine's exceptions in step with the
// WorkloadPolicyException resources, and writes each one's status.state:
// Active, then Expired once its expiresAt has passed (it looks again at
// that moment). Whether an exception applies is decided at each review
// from its expiresAt, never from the status: an exception stops applying
// the moment it expires on every replica, whether or not this reconciler
// has run since.
//
// Every replica runs it, without leader election, as policysource.Reconciler.
type Reconciler struct {
	// Client reads exceptions from the manager's cache and writes their
	// status.
	Client client.Client
	Engine *policies.Engine
	// ClockSkew is policy.exceptions.clockSkew (policies.NewExceptions).
	ClockSkew time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	loaded atomic.Bool
	// mu guards items: the exceptions in force by namespace and name, and
	// those the reconciler found deleted, so that the list loaded at start
	// (older than what the reconciler has seen since) never puts one back.
	mu    sync.Mutex
	items map[types.NamespacedName]exceptionItem
}

// exceptionItem is one exception as converted (from the generation of
// the object of that UID), or deleted.
type exceptionItem struct {
	ex         *policies.Exception
	uid        types.UID
	generation int64
	deleted    bool
}

// SetupWithManager registers the reconciler, and a runnable that loads
// every exception once the cache has synced (the readiness check passes
// only after that).
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("workloadpolicyexception").
		For(&policyv1.WorkloadPolicyException{}).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), SkipNameValidation: ptr.To(true)}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("creating the WorkloadPolicyException controller: %w", err)
	}
	return mgr.Add(runnable.EveryReplica(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // stopping
		}
		n, err := r.loadAll(ctx)
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
func (r *Reconciler) Checker(_ *http.Request) error {
	if !r.loaded.Load() {
		return errExceptionsNotLoaded
	}
	return nil
}

var errExceptionsNotLoaded = errors.New("WorkloadPolicyExceptions not loaded yet")

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// loadAll converts every exception of the cache that the reconciler has
// not seen yet, and publishes them.
func (r *Reconciler) loadAll(ctx context.Context) (int, error) {
	var list policyv1.WorkloadPolicyExceptionList
	if err := r.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("listing WorkloadPolicyExceptions: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range list.Items {
		key := client.ObjectKeyFromObject(&list.Items[i])
		if _, seen := r.items[key]; !seen {
			r.set(key, &list.Items[i], r.convert(ctx, &list.Items[i]))
		}
	}
	r.publish()
	return len(list.Items), nil
}

// convert is the exception in the engine's form. One that cannot be
// converted (a label selector the API server let through but that does not
// parse) is logged and applies nowhere: nil.
func (r *Reconciler) convert(ctx context.Context, ex *policyv1.WorkloadPolicyException) *policies.Exception {
	e, err := validators.ExceptionOf(ex)
	if err != nil {
		logf.FromContext(ctx).Info("WorkloadPolicyException cannot be used; it applies nowhere",
			"namespace", ex.Namespace, "name", ex.Name, "error", err.Error())
		return nil
	}
	return e
}

// set records what the reconciler knows of key: ex converted to e, or
// nil when it is gone or applies nowhere; r.mu is held.
func (r *Reconciler) set(key types.NamespacedName, ex *policyv1.WorkloadPolicyException, e *policies.Exception) {
	if r.items == nil {
		r.items = map[types.NamespacedName]exceptionItem{}
	}
	it := exceptionItem{ex: e, deleted: e == nil}
	if ex != nil {
		it.uid, it.generation = ex.UID, ex.Generation
	}
	r.items[key] = it
}

// publish swaps the exceptions into the engine; r.mu is held.
func (r *Reconciler) publish() {
	es := make([]*policies.Exception, 0, len(r.items))
	for _, it := range r.items {
		if !it.deleted {
			es = append(es, it.ex)
		}
	}
	r.Engine.SetExceptions(policies.NewExceptions(r.ClockSkew, es...))
}

// update converts and publishes one exception, or its removal (ex nil).
// A generation already in force (a status write) changes nothing: the
// engine's snapshot, which the audit watches, stays the same.
func (r *Reconciler) update(ctx context.Context, key types.NamespacedName, ex *policyv1.WorkloadPolicyException) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it, seen := r.items[key]
	switch {
	case ex == nil && seen && it.deleted:
		return
	case ex != nil && seen && !it.deleted && it.uid == ex.UID && it.generation == ex.Generation:
		return
	}
	var e *policies.Exception
	if ex != nil {
		e = r.convert(ctx, ex)
	}
	r.set(key, ex, e)
	r.publish()
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ex := &policyv1.WorkloadPolicyException{}
	if err := r.Client.Get(ctx, req.NamespacedName, ex); err != nil {
		if apierrors.IsNotFound(err) {
			r.update(ctx, req.NamespacedName, nil)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	r.update(ctx, req.NamespacedName, ex)
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
