package aiinference

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// FieldManager is the server-side apply field manager the controller
// writes its children under: fields it never sets (kubectl rollout
// restart's annotation, other tools' labels) belong to others and stay.
const FieldManager = "modelgate-aiinference"

// The controller reads AIInferences and writes their status; it creates
// and updates (never deletes: garbage collection does) the Deployment and
// Service of each, and reads their ReplicaSets and Pods for the status.
// Setting a controller reference that blocks its owner's deletion needs
// update on aiinferences/finalizers where the API server enforces owner
// references. Events are events.k8s.io/v1.
// +kubebuilder:rbac:groups=serving.modelgate.io,resources=aiinferences,verbs=get;list;watch
// +kubebuilder:rbac:groups=serving.modelgate.io,resources=aiinferences/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=serving.modelgate.io,resources=aiinferences/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Leader election holds a Lease in modelgate's namespace, and records its
// changes of leader as core events there.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=modelgate-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=modelgate-system,resources=events,verbs=create;patch

// Reconciler turns an AIInference into its Deployment and Service and
// writes its status.
type Reconciler struct {
	// Client reads from the manager's cache, which holds only modelgate's
	// children (labelled InferenceLabel), and writes to the API server.
	Client client.Client
	// Reader reads from the API server: before creating a child, it looks
	// for an object of that name the cache does not hold (one modelgate
	// did not write), which is left alone. Client when nil.
	Reader client.Reader
	Scheme *runtime.Scheme
	// Engines are the engine presets; DefaultEngines when nil.
	Engines map[servingv1.EngineName]Engine
	// Recorder records events on the AIInference; none when nil.
	Recorder events.EventRecorder
	// Metrics counts phases and transitions; none when nil.
	Metrics *Metrics
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	settled settledChildren
}

// NewReconciler is the reconciler modelgate serve runs in mgr: children
// read from the manager's cache (which holds only labelled children, see
// webhook.CacheOptions) and a name it does not hold looked up on the API
// server, events recorded as FieldManager, phases counted in reg. Nil
// engines are DefaultEngines.
func NewReconciler(mgr ctrl.Manager, engines map[servingv1.EngineName]Engine, reg prometheus.Registerer) *Reconciler {
	return &Reconciler{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Scheme:   mgr.GetScheme(),
		Engines:  engines,
		Recorder: mgr.GetEventRecorder(FieldManager),
		Metrics:  NewMetrics(reg),
	}
}

// SetupWithManager watches AIInferences, the children they control, and
// the ReplicaSets and Pods of those children (by InferenceLabel).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[InferenceLabel]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	labelled := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[InferenceLabel]
		return ok
	}))
	err := ctrl.NewControllerManagedBy(mgr).
		Named("aiinference").
		For(&servingv1.AIInference{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Watches(&appsv1.ReplicaSet{}, byLabel, labelled).
		Watches(&corev1.Pod{}, byLabel, labelled).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the AIInference controller: %w", err)
	}
	return nil
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ai := &servingv1.AIInference{}
	if err := r.Client.Get(ctx, req.NamespacedName, ai); err != nil {
		if apierrors.IsNotFound(err) {
			r.Metrics.forget(req.NamespacedName)
			r.settled.forget(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ai.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // garbage collection removes the children
	}
	obs := Observed{}
	var writeErr error
	d, err := Deployment(ai, r.engines())
	if err != nil {
		obs.Problem = &ChildProblem{Reason: ReasonChildNotWritten, Message: err.Error()}
	} else {
		live, problem, err := r.apply(ctx, ai, d)
		obs.Deployment, obs.Problem, writeErr = live, problem, err
		if obs.Problem == nil && writeErr == nil {
			_, obs.Problem, writeErr = r.apply(ctx, ai, Service(ai))
		}
	}
	if obs.Deployment != nil {
		if err := r.children(ctx, ai, &obs); err != nil {
			return reconcile.Result{}, err
		}
	}
	now := r.now()
	status, recheck := Status(ai, obs, now)
	from, fromReason := ai.Status.Phase, readyReason(ai.Status)
	if !equality.Semantic.DeepEqual(status, ai.Status) {
		ai.Status = status
		if err := r.Client.Status().Update(ctx, ai); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the status of AIInference %s: %w", req.NamespacedName, err)
		}
		if status.Phase != from || readyReason(status) != fromReason {
			r.phaseEvent(ai)
		}
	}
	r.Metrics.observe(req.NamespacedName, from, status.Phase, ai.CreationTimestamp.Time, now)
	if writeErr != nil {
		return reconcile.Result{}, writeErr
	}
	if !recheck.IsZero() {
		return reconcile.Result{RequeueAfter: max(recheck.Sub(r.now()), time.Second)}, nil
	}
	return reconcile.Result{}, nil
}

// apply writes a child with server-side apply unless that would change
// nothing: a dry run first, compared with the live object, so that an
// unchanged AIInference never writes even though the webhook decorates
// what is applied. A child of the same name this AIInference does not
// control is left alone and reported; so is a write the API server
// refuses (a policy denial).
func (r *Reconciler) apply(ctx context.Context, ai *servingv1.AIInference, obj client.Object) (*appsv1.Deployment, *ChildProblem, error) {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	key := client.ObjectKeyFromObject(obj)
	live, err := r.live(ctx, obj)
	if err != nil {
		return nil, nil, err
	}
	if live != nil && !metav1.IsControlledBy(live, ai) {
		return nil, &ChildProblem{Reason: ReasonNameConflict,
			Message: fmt.Sprintf("%s %s exists and is not controlled by this AIInference: it is left alone", kind, key)}, nil
	}
	if err := controllerutil.SetControllerReference(ai, obj, r.Scheme); err != nil {
		return nil, nil, fmt.Errorf("owning %s %s: %w", kind, key, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding %s %s: %w", kind, key, err)
	}
	delete(u, "status")
	if m, ok := u["metadata"].(map[string]any); ok {
		delete(m, "creationTimestamp")
	}
	applied := &unstructured.Unstructured{}
	applied.SetUnstructuredContent(u)
	if live != nil {
		fp := fingerprint(applied, live)
		if r.settled.is(kind, key, fp) {
			return deploymentOf(live), nil, nil
		}
		dry := applied.DeepCopy()
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(dry), client.FieldOwner(FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
			return nil, problemOf(kind, key, err), nil
		}
		if sameObject(dry, live) {
			r.settled.remember(kind, key, fp)
			return deploymentOf(live), nil, nil
		}
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		if p := problemOf(kind, key, err); p != nil {
			return nil, p, nil
		}
		return nil, nil, fmt.Errorf("applying %s %s: %w", kind, key, err)
	}
	verb := "Updated"
	if live == nil {
		verb = "Created"
	}
	r.event(ai, corev1.EventTypeNormal, verb+kind, "Apply", fmt.Sprintf("%s %s %s", verb, kind, key.Name))
	written, err := r.live(ctx, obj)
	if err != nil {
		return nil, nil, err
	}
	return deploymentOf(written), nil, nil
}

// live reads a child as it is, nil when there is none.
func (r *Reconciler) live(ctx context.Context, obj client.Object) (client.Object, error) {
	out, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errors.New("a child that is not an object")
	}
	key := client.ObjectKeyFromObject(obj)
	err := r.Client.Get(ctx, key, out)
	if apierrors.IsNotFound(err) && r.Reader != nil {
		// The cache holds only labelled children: an object of that name
		// someone else made is found on the API server.
		err = r.Reader.Get(ctx, key, out)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	return out, nil
}

// children reads the Deployment's ReplicaSets and Pods from the cache.
func (r *Reconciler) children(ctx context.Context, ai *servingv1.AIInference, obs *Observed) error {
	sel := client.MatchingLabels{InferenceLabel: ai.Name}
	var rss appsv1.ReplicaSetList
	if err := r.Client.List(ctx, &rss, client.InNamespace(ai.Namespace), sel); err != nil {
		return fmt.Errorf("listing ReplicaSets: %w", err)
	}
	for _, rs := range rss.Items {
		if metav1.IsControlledBy(&rs, obs.Deployment) {
			obs.ReplicaSets = append(obs.ReplicaSets, rs)
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(ai.Namespace), sel); err != nil {
		return fmt.Errorf("listing Pods: %w", err)
	}
	obs.Pods = pods.Items
	return nil
}

// problemOf turns a refusal of a child into the status's cause; nil for
// errors worth retrying.
func problemOf(kind string, key client.ObjectKey, err error) *ChildProblem {
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "denied the request"),
		apierrors.IsInvalid(err) && strings.Contains(err.Error(), "denied the request"):
		return &ChildProblem{Reason: ReasonPolicyDenied, Message: fmt.Sprintf("%s %s: %v", kind, key, err)}
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return &ChildProblem{Reason: ReasonChildNotWritten, Message: fmt.Sprintf("%s %s: %v", kind, key, err)}
	}
	return nil
}

// maxNote is the longest event note the API server accepts.
const maxNote = 1024

// event records an event on the AIInference.
func (r *Reconciler) event(ai *servingv1.AIInference, eventType, reason, action, note string) {
	if r.Recorder == nil {
		return
	}
	// events.k8s.io/v1 refuses a note over 1 kB.
	if len(note) > maxNote {
		note = strings.ToValidUTF8(note[:maxNote-3], "") + "..."
	}
	r.Recorder.Eventf(ai, nil, eventType, reason, action, "%s", note)
}

// phaseEvent records the phase the status moved to, with the Ready
// condition's reason and message: a Warning for Failed.
func (r *Reconciler) phaseEvent(ai *servingv1.AIInference) {
	eventType := corev1.EventTypeNormal
	if ai.Status.Phase == servingv1.PhaseFailed {
		eventType = corev1.EventTypeWarning
	}
	note := string(ai.Status.Phase)
	if c := meta.FindStatusCondition(ai.Status.Conditions, ConditionReady); c != nil && c.Message != "" {
		note += ": " + c.Message
	}
	reason := string(ai.Status.Phase)
	if rr := readyReason(ai.Status); rr != "" && ai.Status.Phase != servingv1.PhaseReady {
		reason = rr
	}
	r.event(ai, eventType, reason, "Reconcile", note)
}

// readyReason is the reason of the status's Ready condition.
func readyReason(s servingv1.AIInferenceStatus) string {
	if c := meta.FindStatusCondition(s.Conditions, ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func (r *Reconciler) engines() map[servingv1.EngineName]Engine {
	if r.Engines == nil {
		return DefaultEngines
	}
	return r.Engines
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// sameObject reports whether what a dry-run apply would leave equals the
// live object in everything the controller cares for: labels,
// annotations, owners and spec.
func sameObject(dry *unstructured.Unstructured, live client.Object) bool {
	l, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return false
	}
	d := dry.Object
	for _, path := range comparedPaths {
		a, _, _ := unstructured.NestedFieldNoCopy(d, path...)
		b, _, _ := unstructured.NestedFieldNoCopy(l, path...)
		if !equality.Semantic.DeepEqual(a, b) {
			return false
		}
	}
	return true
}

// deploymentOf is obj if it is a Deployment.
func deploymentOf(obj client.Object) *appsv1.Deployment {
	d, _ := obj.(*appsv1.Deployment)
	return d
}
