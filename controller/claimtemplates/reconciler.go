// Package claimtemplates is the controller that creates, in a Pod's
// namespace, the ResourceClaimTemplate the GPU claim modelgate injected
// names, sealed, and deletes its own templates once no Pod names them.
package claimtemplates

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/internal/seal"
	policyview "github.com/modelgate/modelgate/policies/workload"
)

// The claim template controller watches the Pods that carry
// gpuclaim.TemplateLabel and creates the templates they name, sealed; it
// deletes its own templates (those whose seal verifies) once no Pod has
// named them for a while.
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaimtemplates,verbs=create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch

// Idle is how long a template of modelgate's stays once no
// Pod names it. A Pod that names it again later (a Deployment scaled back
// up) has it created again within moments.
const Idle = 10 * time.Minute

// Reconciler creates, in a Pod's namespace, the
// ResourceClaimTemplate the GPU claim modelgate injected names. The webhook
// cannot (its hot path makes no API calls), and the template cannot exist
// before the Pod is admitted (a Deployment's Pods are admitted after it).
// Kubernetes' resource claim controller makes the Pod's claim once the
// template is there: it re-queues the Pods that name a template as soon as
// the template appears.
//
// Only a Pod whose seal verifies is believed: the template is built from
// what its sealed injection record says, and only when that gives the name
// the Pod's claim and label carry. A label written by hand makes nothing.
//
// Likewise, only a template whose gpuclaim.SealAnnotation verifies is
// deleted: the controller seals each template it creates, and a template
// that carries the managed-by label without that seal (one a user wrote,
// or one an older modelgate made) is left alone.
type Reconciler struct {
	// Client creates and deletes templates, and reads them from the
	// manager's cache.
	Client client.Client
	// Pods reads the Pods that carry gpuclaim.TemplateLabel (a cache of
	// those alone).
	Pods client.Reader
	// DRA names the driver's device class, attributes and products.
	DRA gpuclaim.Options
	// Seal verifies the Pods' reserved metadata, and seals and verifies
	// the templates the controller makes.
	Seal *seal.Key
	// Idle is Idle unless set (tests).
	Idle time.Duration
	// now is time.Now unless set (tests).
	now func() time.Time

	mu          sync.Mutex
	unusedSince map[types.NamespacedName]time.Time
}

// Reconcile makes the template req names exist while a Pod names it, and
// go once none has for Idle.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx).WithValues("namespace", req.Namespace, "template", req.Name)
	var pods corev1.PodList
	if err := r.Pods.List(ctx, &pods, client.InNamespace(req.Namespace), client.MatchingLabels{gpuclaim.TemplateLabel: req.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the pods that name %s: %w", req, err)
	}
	var want *resourcev1.ResourceClaimTemplate
	for i := range pods.Items {
		if want = r.wanted(&pods.Items[i], req.Name); want != nil {
			break
		}
	}
	var cur resourcev1.ResourceClaimTemplate
	err := r.Client.Get(ctx, req.NamespacedName, &cur)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("reading template %s: %w", req, err)
	}
	if want != nil {
		r.forget(req.NamespacedName) // in use: not idle
		if exists {
			switch {
			case !managed(&cur):
				log.Info("a template of modelgate's name exists that modelgate did not make; the Pods' claims come from it, and the policies judged them by what it asks for")
			case !gpuclaim.Sealed(r.Seal, &cur):
				log.V(1).Info("the template carries modelgate's managed-by label but no seal of modelgate's (written by hand, or by a modelgate before templates were sealed): it will not be deleted")
			}
			return reconcile.Result{}, nil
		}
		gpuclaim.Seal(r.Seal, want)
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating template %s: %w", req, err)
		}
		log.V(1).Info("created the GPU claim template", "request", want.Annotations[gpuclaim.RequestAnnotation])
		return reconcile.Result{}, nil
	}
	if !exists || !managed(&cur) {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, nil
	}
	if !gpuclaim.Sealed(r.Seal, &cur) {
		r.forget(req.NamespacedName)
		log.V(1).Info("leaving the unused template alone: it carries modelgate's managed-by label but no seal of modelgate's (written by hand, or by a modelgate before templates were sealed)")
		return reconcile.Result{}, nil
	}
	if wait := r.idleLeft(req.NamespacedName); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	err = r.Client.Delete(ctx, &cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return reconcile.Result{}, fmt.Errorf("deleting unused template %s: %w", req, err)
	}
	r.forget(req.NamespacedName)
	log.V(1).Info("deleted the unused GPU claim template")
	return reconcile.Result{}, nil
}

// wanted is the template the Pod's sealed record stands for, when that is
// the template name, nil otherwise.
func (r *Reconciler) wanted(p *corev1.Pod, name string) *resourcev1.ResourceClaimTemplate {
	if !namesTemplate(&p.Spec, name) || !r.Seal.Verify(p.Namespace, &p.ObjectMeta) {
		return nil
	}
	g := policyview.RecordGPUClaim(p.Annotations[annotations.Injected])
	if g == nil || g.Count <= 0 {
		return nil
	}
	t, err := gpuclaim.Template(p.Namespace, *g, r.DRA)
	if err != nil || t.Name != name {
		return nil
	}
	return t
}

// namesTemplate reports whether the pod's GPU claim comes from the template.
func namesTemplate(spec *corev1.PodSpec, name string) bool {
	for _, rc := range spec.ResourceClaims {
		if rc.Name == gpuclaim.ClaimName && rc.ResourceClaimTemplateName != nil && *rc.ResourceClaimTemplateName == name {
			return true
		}
	}
	return false
}

func managed(t *resourcev1.ResourceClaimTemplate) bool {
	return t.Labels[gpuclaim.ManagedByLabel] == gpuclaim.ManagedBy
}

func (r *Reconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

func (r *Reconciler) forget(k types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.unusedSince, k)
}

// idleLeft is how much longer the template stays unused before it goes,
// counting from the first time this replica saw no Pod naming it.
func (r *Reconciler) idleLeft(k types.NamespacedName) time.Duration {
	idle := r.Idle
	if idle <= 0 {
		idle = Idle
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unusedSince == nil {
		r.unusedSince = map[types.NamespacedName]time.Time{}
	}
	since, ok := r.unusedSince[k]
	if !ok {
		since = r.clock()
		r.unusedSince[k] = since
	}
	return idle - r.clock().Sub(since)
}

// SetupWithManager registers the controller where the cluster serves
// resource.k8s.io/v1, with a cache of the Pods that carry
// gpuclaim.TemplateLabel; elsewhere it logs that and adds nothing.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	if !gpuclaim.Served(mgr.GetRESTMapper()) {
		mgr.GetLogger().Info("the cluster serves no resource.k8s.io/v1: GPU claim templates are not created")
		return nil
	}
	sel := labels.NewSelector()
	if req, err := labels.NewRequirement(gpuclaim.TemplateLabel, selection.Exists, nil); err == nil {
		sel = sel.Add(*req)
	}
	pods, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: sel}},
	})
	if err != nil {
		return fmt.Errorf("creating the GPU claim pods' cache: %w", err)
	}
	if err := mgr.Add(pods); err != nil {
		return fmt.Errorf("adding the GPU claim pods' cache: %w", err)
	}
	r.Pods = pods
	byLabel := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, p *corev1.Pod) []reconcile.Request {
		name := p.Labels[gpuclaim.TemplateLabel]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: name}}}
	})
	ours := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, t *resourcev1.ResourceClaimTemplate) []reconcile.Request {
		if !managed(t) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: t.Namespace, Name: t.Name}}}
	})
	err = ctrl.NewControllerManagedBy(mgr).
		Named("gpu-claim-templates").
		WatchesRawSource(source.Kind(pods, &corev1.Pod{}, byLabel)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &resourcev1.ResourceClaimTemplate{}, ours)).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("creating the GPU claim template controller: %w", err)
	}
	return nil
}
