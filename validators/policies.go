package validators

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/workload"
)

// Workload is one admitted workload, decoded: what the policies judge.
type Workload struct {
	// Kind and APIVersion are the object's (Deployment, apps/v1).
	Kind, APIVersion string
	// Operation is CREATE or UPDATE.
	Operation string
	// Namespace is the object's namespace, NamespaceLabels its labels.
	Namespace       string
	NamespaceLabels map[string]string
	// Object is the object's own metadata, PodMeta the pod template's (the
	// Pod's own for a Pod), PodSpec the pod (template) spec.
	Object, PodMeta *metav1.ObjectMeta
	PodSpec         *corev1.PodSpec
	// Claim is, for a ResourceClaim or ResourceClaimTemplate, the claim
	// spec it asks for (workload.Source.Claim); nil for a workload.
	Claim *resourcev1.ResourceClaimSpec
	// Claims, when set, find what the pod's resource claims ask for
	// instead of the checker's Claims: the claims an UPDATE's old Pod was
	// admitted with (workload.CreatedBefore).
	Claims workload.ClaimResolver
	// Settings are the object's parsed modelgate.io annotations.
	Settings annotations.Settings
	// ServingContainer names the container serving the model, "" if none.
	ServingContainer string
	// UserInfo is the requester.
	UserInfo authenticationv1.UserInfo
	// Raw and OldRaw are the object and the old object as JSON (OldRaw nil
	// on CREATE): input.object and input.oldObject.
	Raw, OldRaw []byte
	// Set is the policy set to evaluate, nil for the engine's current one:
	// the one the caller read what the policies need by.
	Set *policies.Set
	// Key, when set, is the review as its request's bytes give it: the
	// decision is cached under it too (policies.Review.Raw).
	Key *policies.RawReview
}

// Policies runs the policy engine over workloads.
type Policies struct {
	// Engine holds the current policy set.
	Engine *policies.Engine
	// GPU names the GPU resource and node labels (from the Configuration).
	GPU workload.GPUKeys
	// Seal verifies the reserved metadata the object carries: only what
	// modelgate sealed reads as the owner, team and injection record.
	Seal *seal.Key
	// Claims finds what the pod's resource claims ask for; nil knows only
	// the GPU claim modelgate's sealed record names.
	Claims workload.ClaimResolver
}

// Check builds the workload's view, converts what the policies may read of
// it to OPA's value form once, and evaluates every policy that matches it.
func (p *Policies) Check(ctx context.Context, w *Workload) policies.Decision {
	claims := p.Claims
	if w.Claims != nil {
		claims = w.Claims
	}
	// The set is read once: the view is built for the keys its policies
	// read, and the same set evaluates it.
	set := w.Set
	if set == nil {
		set = p.Engine.Set()
	}
	view := workload.Build(workload.Source{
		Kind:             w.Kind,
		APIVersion:       w.APIVersion,
		Operation:        w.Operation,
		Object:           w.Object,
		PodMeta:          w.PodMeta,
		PodSpec:          w.PodSpec,
		Claim:            w.Claim,
		Settings:         w.Settings,
		ServingContainer: w.ServingContainer,
		UserInfo:         w.UserInfo,
		NamespaceLabels:  w.NamespaceLabels,
		GPU:              p.GPU,
		Claims:           claims,
		Sealed:           p.Seal.Verify(w.Namespace, w.Object),
		Reads:            set.ReadsWorkloadKey,
	})
	d := p.Engine.Evaluate(ctx, policies.Review{
		Kind:            w.Kind,
		Namespace:       w.Namespace,
		NamespaceLabels: w.NamespaceLabels,
		View:            view,
		Set:             set,
		Object:          w.Raw,
		OldObject:       w.OldRaw,
		Raw:             w.Key,
	})
	p.except(&d, w)
	return d
}

// except lifts the denials that an exception in force covers: checked at
// the time of the review, so an exception stops applying the moment it
// expires, whatever its status says.
func (p *Policies) except(d *policies.Decision, w *Workload) {
	x := p.Engine.Exceptions()
	if x.Len() == 0 || d.Allowed() {
		return
	}
	s := SubjectOf(w.Kind, w.Namespace, w.Object, w.PodMeta)
	x.Except(d, &s, x.Now())
}
