package webhook

import (
	"context"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/internal/gpuclaim"
	policyview "github.com/modelgate/modelgate/policies/workload"
)

// The validating webhook reads the ResourceClaimTemplates and
// ResourceClaims a Pod names, so that the policies count the GPUs of
// every claim, the user's own included.
// +kubebuilder:rbac:groups=resource.k8s.io,resources=resourceclaimtemplates;resourceclaims,verbs=get;list;watch

// cachedClaims finds what a pod's resource claims ask for in the manager's
// cache: never an API call. Until the informers have synced, or where the
// cluster serves no resource.k8s.io/v1, it knows no claim, and the view
// lists the pod's claims as unresolved.
type cachedClaims struct {
	reader client.Reader
	ready  atomic.Bool
}

var _ policyview.DatedClaimResolver = (*cachedClaims)(nil)

// ClaimSpec implements policyview.ClaimResolver.
func (c *cachedClaims) ClaimSpec(namespace string, pc corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool) {
	spec, _, ok := c.DatedClaimSpec(namespace, pc)
	return spec, ok
}

// DatedClaimSpec implements policyview.DatedClaimResolver.
func (c *cachedClaims) DatedClaimSpec(namespace string, pc corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, time.Time, bool) {
	if c == nil || !c.ready.Load() {
		return nil, time.Time{}, false
	}
	// The informers have synced: a Get reads the local store at once.
	ctx := context.Background()
	switch {
	case pc.ResourceClaimName != nil:
		var rc resourcev1.ResourceClaim
		if c.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: *pc.ResourceClaimName}, &rc) != nil {
			return nil, time.Time{}, false
		}
		return &rc.Spec, rc.CreationTimestamp.Time, true
	case pc.ResourceClaimTemplateName != nil:
		var t resourcev1.ResourceClaimTemplate
		if c.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: *pc.ResourceClaimTemplateName}, &t) != nil {
			return nil, time.Time{}, false
		}
		return &t.Spec.Spec, t.CreationTimestamp.Time, true
	}
	return nil, time.Time{}, false
}

// start starts the informers of templates and claims with the manager and
// marks the resolver ready once they have synced; where the cluster serves
// no resource.k8s.io/v1 it logs that and stays unready.
func (c *cachedClaims) start(ctx context.Context, ca cache.Cache, m meta.RESTMapper) error {
	log := logf.FromContext(ctx).WithName("claims")
	if !gpuclaim.Served(m) {
		log.Info("the cluster serves no resource.k8s.io/v1: policies see the Pods' resource claims as unresolved")
		return nil
	}
	for _, obj := range []client.Object{&resourcev1.ResourceClaimTemplate{}, &resourcev1.ResourceClaim{}} {
		if _, err := ca.GetInformer(ctx, obj); err != nil {
			log.Error(err, "starting an informer; policies see the Pods' resource claims as unresolved")
			return nil
		}
	}
	if ca.WaitForCacheSync(ctx) {
		c.ready.Store(true)
	}
	return nil
}

// claimCacheOptions keep what the cache holds of claims small: a claim's
// status (its allocation, the devices' results) is dropped.
func claimCacheOptions() cache.ByObject {
	return cache.ByObject{Transform: func(obj any) (any, error) {
		if rc, ok := obj.(*resourcev1.ResourceClaim); ok {
			rc.Status = resourcev1.ResourceClaimStatus{}
			rc.ManagedFields = nil
		}
		return obj, nil
	}}
}
