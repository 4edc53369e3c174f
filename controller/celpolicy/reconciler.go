// Package celpolicy is the controller that keeps, for every WorkloadPolicy
// with a CEL form (spec.cel), the ValidatingAdmissionPolicy made of it
// (policies/celform) applied, with the WorkloadPolicyExceptions in force
// that name the policy and with its binding when the generated policies
// are put in force, and reports in the WorkloadPolicy's status whether the
// API server accepted it: condition CELReady.
package celpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/validators"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.modelgate.io,resources=workloadpolicyexceptions,verbs=get;list;watch

// ConditionCELReady is the WorkloadPolicy condition that says whether the
// API server accepted the ValidatingAdmissionPolicy made of its CEL form.
const ConditionCELReady = "CELReady"

// Reasons of CELReady.
const (
	// ReasonAccepted: the API server holds the generated policy and its
	// type checking found nothing (status True).
	ReasonAccepted = "Accepted"
	// ReasonTypeCheckErrors: the API server's type checking of the
	// generated policy found problems; the message lists them (False).
	ReasonTypeCheckErrors = "TypeCheckErrors"
	// ReasonRejected: the API server refused the generated policy or its
	// binding; the message says why (False).
	ReasonRejected = "Rejected"
	// ReasonChecking: the API server has not type-checked this generation
	// of the generated policy yet (Unknown).
	ReasonChecking = "Checking"
)

// FieldManager is the field manager of what the controller applies.
const FieldManager = "modelgate-celpolicy"

// Reconciler applies the generated ValidatingAdmissionPolicy of each
// WorkloadPolicy with a CEL form, and its binding when Enforce is set;
// deletes them when the form goes (the WorkloadPolicy's deletion deletes
// them through their owner reference); and writes CELReady. The policy
// holds the WorkloadPolicyExceptions that name the WorkloadPolicy and are
// in force now, as modelgate decides it (policies.Exceptions.InForce, with
// the clock skew): it is generated again when one is written or deleted,
// and when the first of them expires. It runs on the leader only: every
// replica would apply the same objects.
type Reconciler struct {
	// Client reads WorkloadPolicies and the generated objects from the
	// manager's cache and writes them.
	Client client.Client
	// Keys name the GPU resource and product label (injection.gpu).
	Keys celform.Keys
	// Scope is the validating webhooks' scope.
	Scope celform.Scope
	// Enforce puts the generated policies in force: their bindings are
	// applied. Without it the API server only type-checks them.
	Enforce bool
	// ClockSkew is policy.exceptions.clockSkew: an exception stops
	// applying that long before its expiresAt (policies.NewExceptions).
	ClockSkew time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wp := &policyv1.WorkloadPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, wp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name := celform.Name(wp.Name)
	if wp.Spec.CEL == nil || len(celform.Check(wp, r.Keys)) > 0 {
		// No form, or one that does not compile (refused at apply, so only
		// a policy from before this version has one): nothing generated.
		if err := r.remove(ctx, wp.Name, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, name); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.remove(ctx, wp.Name, &admissionregistrationv1.ValidatingAdmissionPolicy{}, name); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.setCondition(ctx, wp, nil)
	}
	scope := r.Scope
	exceptions, expires, err := r.exceptions(ctx, wp.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	scope.Exceptions = exceptions
	// Generated again when the first exception in force expires, for the
	// API server to stop applying it.
	done := ctrl.Result{RequeueAfter: expires}
	vap, binding, err := celform.Generate(wp, r.Keys, scope)
	if err != nil {
		return done, r.setCondition(ctx, wp, rejected(err))
	}
	//nolint:staticcheck // client.Apply with a typed object is the plain way to apply what is generated.
	if err := r.Client.Patch(ctx, vap, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return done, r.setCondition(ctx, wp, rejected(err))
		}
		return ctrl.Result{}, fmt.Errorf("applying ValidatingAdmissionPolicy %s: %w", name, err)
	}
	if r.Enforce {
		//nolint:staticcheck // as above.
		if err := r.Client.Patch(ctx, binding, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
				return done, r.setCondition(ctx, wp, rejected(err))
			}
			return ctrl.Result{}, fmt.Errorf("applying ValidatingAdmissionPolicyBinding %s: %w", name, err)
		}
	} else if err := r.remove(ctx, wp.Name, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, name); err != nil {
		return ctrl.Result{}, err
	}
	return done, r.setCondition(ctx, wp, Condition(vap, wp.Generation))
}

// exceptions are the WorkloadPolicyExceptions that name the WorkloadPolicy
// called policy and are in force now (InForce), and how long until the
// first of them stops applying.
func (r *Reconciler) exceptions(ctx context.Context, policy string) ([]policyv1.WorkloadPolicyException, time.Duration, error) {
	var list policyv1.WorkloadPolicyExceptionList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, 0, fmt.Errorf("listing WorkloadPolicyExceptions: %w", err)
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	in, next, unusable := InForce(list.Items, policy, r.ClockSkew, now)
	for _, ex := range unusable {
		logf.FromContext(ctx).V(1).Info("WorkloadPolicyException cannot be used; it applies nowhere", "namespace", ex.Namespace, "name", ex.Name)
	}
	return in, next, nil
}

// InForce are the exceptions of es that name the WorkloadPolicy called
// policy (celform.ExceptionsFor) and are in force at now, as modelgate
// decides it (policies.Exceptions.InForce: until clockSkew before their
// expiresAt); next is how long until the first of them stops applying (0
// when none is in force), and unusable those whose label selector does not
// parse, which apply nowhere, as in the webhook (validators.ExceptionOf).
func InForce(es []policyv1.WorkloadPolicyException, policy string, clockSkew time.Duration, now time.Time) (in []policyv1.WorkloadPolicyException, next time.Duration, unusable []policyv1.WorkloadPolicyException) {
	x := policies.NewExceptions(clockSkew)
	for _, ex := range celform.ExceptionsFor(policy, es) {
		e, err := validators.ExceptionOf(&ex)
		if err != nil {
			unusable = append(unusable, ex)
			continue
		}
		if !x.InForce(e, now) {
			continue
		}
		in = append(in, ex)
		// It stops applying once now+skew reaches expiresAt.
		if left := e.ExpiresAt.Sub(now) - max(clockSkew, 0); next == 0 || left < next {
			next = left
		}
	}
	return in, next, unusable
}

// policiesNamed maps a WorkloadPolicyException to the WorkloadPolicies it
// names, whose generated policies hold it.
func policiesNamed(_ context.Context, obj client.Object) []reconcile.Request {
	ex, ok := obj.(*policyv1.WorkloadPolicyException)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, p := range ex.Spec.Policies {
		if celform.Names(ex, p) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: p}})
		}
	}
	return out
}

// remove deletes the generated object of that name, if it is the one made
// for policy: a ValidatingAdmissionPolicy of that name that modelgate did
// not make for it is left alone.
func (r *Reconciler) remove(ctx context.Context, policy string, obj client.Object, name string) error {
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if l := obj.GetLabels(); l[celform.ManagedByLabel] != celform.ManagedBy || l[celform.PolicyLabel] != policy {
		return nil
	}
	if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, name, err)
	}
	return nil
}

// rejected is CELReady when the API server refused what was generated.
func rejected(err error) *metav1.Condition {
	msg := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		msg = status.Status().Message
	}
	return &metav1.Condition{Type: ConditionCELReady, Status: metav1.ConditionFalse, Reason: ReasonRejected, Message: msg}
}

// Condition is CELReady for the generated policy vap as the API server
// holds it: Unknown until its type checking has seen vap's generation,
// False with the warnings when it found problems, else True. generation is
// the WorkloadPolicy's.
func Condition(vap *admissionregistrationv1.ValidatingAdmissionPolicy, generation int64) *metav1.Condition {
	c := &metav1.Condition{Type: ConditionCELReady, ObservedGeneration: generation}
	switch tc := vap.Status.TypeChecking; {
	case vap.Status.ObservedGeneration < vap.Generation || tc == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, ReasonChecking, "the API server has not type-checked ValidatingAdmissionPolicy "+vap.Name+" yet"
	case len(tc.ExpressionWarnings) > 0:
		var lines []string
		for _, w := range tc.ExpressionWarnings {
			lines = append(lines, w.FieldRef+": "+w.Warning)
		}
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonTypeCheckErrors, strings.Join(lines, "; ")
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAccepted, "the API server holds ValidatingAdmissionPolicy "+vap.Name
	}
	return c
}

// setCondition writes CELReady (removes it when c is nil).
func (r *Reconciler) setCondition(ctx context.Context, wp *policyv1.WorkloadPolicy, c *metav1.Condition) error {
	status := wp.Status.DeepCopy()
	if c == nil {
		meta.RemoveStatusCondition(&status.Conditions, ConditionCELReady)
	} else {
		c.ObservedGeneration = wp.Generation
		meta.SetStatusCondition(&status.Conditions, *c)
	}
	if equality.Semantic.DeepEqual(&wp.Status, status) {
		return nil
	}
	wp.Status = *status
	if err := r.Client.Status().Update(ctx, wp); err != nil {
		return fmt.Errorf("updating the status of WorkloadPolicy %s: %w", wp.Name, err)
	}
	return nil
}

// SetupWithManager registers the controller: it watches WorkloadPolicies,
// the generated objects they own (the API server's type checking writes
// the policies' status) and the WorkloadPolicyExceptions that name them
// (their spec: a status write changes nothing generated). Where the cluster serves no
// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (before
// Kubernetes 1.30) it logs that and adds nothing.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	gk := schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "ValidatingAdmissionPolicy"}
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, admissionregistrationv1.SchemeGroupVersion.Version); err != nil {
		mgr.GetLogger().Info("the cluster serves no ValidatingAdmissionPolicy v1: CEL forms are not applied", "error", err.Error())
		return nil
	}
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &policyv1.WorkloadPolicy{}, handler.OnlyControllerOwner())
	err := ctrl.NewControllerManagedBy(mgr).
		Named("workloadpolicy-cel").
		For(&policyv1.WorkloadPolicy{}).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicy{}, owner).
		Watches(&admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, owner).
		Watches(&policyv1.WorkloadPolicyException{}, handler.EnqueueRequestsFromMapFunc(policiesNamed),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("creating the WorkloadPolicy CEL controller: %w", err)
	}
	return nil
}
