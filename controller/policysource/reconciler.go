// Package policysource is the controller that keeps the policy store in
// step with the WorkloadPolicy resources and reports each one's state in
// its status.
package policysource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicies/status,verbs=get;update;patch

// Reconciler keeps the policy store in step with the WorkloadPolicy
// resources and reports each one's state in its status: Ready with reason
// Compiled, or not Ready with the compile errors and their positions.
//
// Every replica runs it on its own, without leader election: each replica
// evaluates policies, so each must load them. The replicas compute the same
// status, so their writes agree; a conflict is retried and then finds
// nothing to change.
type Reconciler struct {
	// Client reads WorkloadPolicies from the manager's cache and writes
	// their status.
	Client client.Client
	Store  *policies.Store
	// Metrics counts the policies that fail to compile (the webhook's
	// PolicyMetrics).
	Metrics LoadFailures

	loaded atomic.Bool
	// mu guards inForce, which records, by name, the UID and generation of
	// each policy compiled into the store, or that it was deleted: a
	// reconcile of the generation in force (every policy's first one,
	// right after loadAll compiled it at start) only checks the status
	// instead of compiling the module again, and loadAll's list, older
	// than what the reconciler has seen, never puts back a policy deleted
	// or an older generation.
	mu      sync.Mutex
	inForce map[string]compiledAt
}

// LoadFailures counts policies that failed to load, by source.
type LoadFailures interface {
	LoadFailed(source string)
}

// compiledAt is a WorkloadPolicy's identity and generation as compiled;
// deleted marks one the reconciler found gone.
type compiledAt struct {
	uid        types.UID
	generation int64
	deleted    bool
}

// isInForce reports whether wp's generation is the one compiled.
func (r *Reconciler) isInForce(wp *policyv1.WorkloadPolicy) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inForce[wp.Name] == compiledAt{uid: wp.UID, generation: wp.Generation}
}

// compiledNow puts c, compiled from wp, in force. From a list (listed
// true), it does not replace what the reconciler decided since.
func (r *Reconciler) compiledNow(wp *policyv1.WorkloadPolicy, c *policies.Compiled, listed bool) {
	r.compiledAll([]*policyv1.WorkloadPolicy{wp}, []*policies.Compiled{c}, listed)
}

// compiledAll is compiledNow for each wps[i] compiled into cs[i] (nil: it
// did not compile), the Set swapped in once.
func (r *Reconciler) compiledAll(wps []*policyv1.WorkloadPolicy, cs []*policies.Compiled, listed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	upserted := make([]*policies.Compiled, 0, len(cs))
	for i, wp := range wps {
		if cs[i] == nil {
			continue
		}
		if at, ok := r.inForce[wp.Name]; listed && ok && (at.deleted || at.uid == wp.UID && at.generation >= wp.Generation) {
			continue
		}
		upserted = append(upserted, cs[i])
		r.record(wp.Name, compiledAt{uid: wp.UID, generation: wp.Generation})
	}
	r.Store.Upsert(upserted...)
}

// dropped takes the policy out of force: deleted, or no longer compiling.
func (r *Reconciler) dropped(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Store.Delete(validators.SourceWorkloadPolicy, name)
	r.record(name, compiledAt{deleted: true})
}

// record sets what inForce says of name; r.mu is held.
func (r *Reconciler) record(name string, at compiledAt) {
	if r.inForce == nil {
		r.inForce = map[string]compiledAt{}
	}
	r.inForce[name] = at
}

// SetupWithManager registers the reconciler, and a runnable that loads
// every WorkloadPolicy once the cache has synced: the readiness check
// (Checker) passes only after that, so no replica serves reviews with
// policies missing.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named("workloadpolicy").
		For(&policyv1.WorkloadPolicy{}).
		// SkipNameValidation: a process runs one manager, but the tests
		// start a second one (modelgate serve's readiness), whose
		// controller of the same name shares the first one's metrics.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), SkipNameValidation: ptr.To(true)}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("creating the WorkloadPolicy controller: %w", err)
	}
	return mgr.Add(runnable.EveryReplica(r.loadAll(mgr)))
}

// loadAll compiles every WorkloadPolicy into the store once the cache has
// synced. It only adds, and never over what the reconciler has seen since
// (compiledNow): a policy deleted or changed meanwhile does not come back
// from the list.
func (r *Reconciler) loadAll(mgr manager.Manager) func(context.Context) error {
	return func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil // stopping
		}
		var list policyv1.WorkloadPolicyList
		if err := r.Client.List(ctx, &list); err != nil {
			return fmt.Errorf("listing WorkloadPolicies: %w", err)
		}
		wps := make([]*policyv1.WorkloadPolicy, len(list.Items))
		for i := range list.Items {
			wps[i] = &list.Items[i]
		}
		cs := compileAll(ctx, wps)
		r.compiledAll(wps, cs, true)
		loaded := 0
		for _, c := range cs {
			if c != nil {
				loaded++
			}
		}
		r.loaded.Store(true)
		logf.FromContext(ctx).Info("loaded WorkloadPolicies", "loaded", loaded, "failed", len(list.Items)-loaded)
		<-ctx.Done()
		return nil
	}
}

// compileAll compiles wps side by side, one per CPU: a starting replica
// is Ready once they are in force. cs[i] is nil when wps[i] does not
// compile (its status says why; the reconciler writes it).
func compileAll(ctx context.Context, wps []*policyv1.WorkloadPolicy) []*policies.Compiled {
	cs := make([]*policies.Compiled, len(wps))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(wps)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(wps); i = int(next.Add(1)) - 1 {
				if c, err := validators.CompileWorkloadPolicy(ctx, wps[i]); err == nil {
					cs[i] = c
				}
			}
		})
	}
	wg.Wait()
	return cs
}

var errPoliciesNotLoaded = errors.New("WorkloadPolicies not loaded yet")

// Checker is a readiness check: ready once every WorkloadPolicy that
// existed at start is loaded.
func (r *Reconciler) Checker(_ *http.Request) error {
	if !r.loaded.Load() {
		return errPoliciesNotLoaded
	}
	return nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wp := &policyv1.WorkloadPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, wp); err != nil {
		if apierrors.IsNotFound(err) {
			r.dropped(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	status := wp.Status.DeepCopy()
	status.ObservedGeneration = wp.Generation
	cond := metav1.Condition{Type: policyv1.ConditionReady, ObservedGeneration: wp.Generation}
	var err error
	if !r.isInForce(wp) {
		var c *policies.Compiled
		if c, err = validators.CompileWorkloadPolicy(ctx, wp); err == nil {
			r.compiledNow(wp, c, false)
		}
	}
	if err == nil {
		status.Errors = nil
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, policyv1.ReasonCompiled, "the policy is compiled and enforced"
	} else {
		// A policy that no longer compiles is not enforced: it must not
		// keep judging with a module that is not the one in the cluster.
		r.dropped(wp.Name)
		r.Metrics.LoadFailed(validators.SourceWorkloadPolicy)
		cond.Status, cond.Message = metav1.ConditionFalse, err.Error()
		if ce, isCompile := errors.AsType[*policies.CompileError](err); isCompile {
			cond.Reason, status.Errors = policyv1.ReasonCompileError, validators.PolicyErrors(ce)
		} else {
			cond.Reason, status.Errors = policyv1.ReasonInvalidParameters, nil
		}
		logf.FromContext(ctx).Info("WorkloadPolicy does not load; it is not enforced", "policy", wp.Name, "error", err.Error())
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if equality.Semantic.DeepEqual(&wp.Status, status) {
		return ctrl.Result{}, nil
	}
	wp.Status = *status
	if err := r.Client.Status().Update(ctx, wp); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // a conflict with another replica: look again.
		}
		return ctrl.Result{}, fmt.Errorf("updating the status of WorkloadPolicy %s: %w", wp.Name, err)
	}
	return ctrl.Result{}, nil
}
