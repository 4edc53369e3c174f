package webhook

import (
	"context"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/policies"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// The validating webhook judges ResourceClaims and ResourceClaimTemplates
// themselves, by what they ask for: a Pod is judged by the claims it names
// as they are when it is admitted, and a claim deleted and created again
// asking for more GPUs (or allocationMode All) before the scheduler
// allocates it must not get past the policies the Pod could not.

// claimObject is a ResourceClaim or ResourceClaimTemplate, decoded: its
// metadata and the claim spec it asks for (a template's spec.spec).
type claimObject struct {
	meta *metav1.ObjectMeta
	spec *resourcev1.ResourceClaimSpec
}

// claimDecoder decodes one claim kind's raw JSON.
type claimDecoder func(raw []byte) (*claimObject, error)

// claimDecoders are the kinds of dynamic resource allocation the validating
// webhook judges, keyed by group/version/kind as the API server sends them
// (resource.k8s.io/v1; matchPolicy Equivalent converts the other versions).
// A claim is small: it is decoded whole, but for managedFields.
var claimDecoders = map[metav1.GroupVersionKind]claimDecoder{
	{Group: resourcev1.GroupName, Version: "v1", Kind: "ResourceClaim"}: func(raw []byte) (*claimObject, error) {
		o := &resourcev1.ResourceClaim{}
		if err := decode.Unmarshal(raw, o, decode.SkipManagedFields); err != nil {
			return nil, err
		}
		return &claimObject{meta: &o.ObjectMeta, spec: &o.Spec}, nil
	},
	{Group: resourcev1.GroupName, Version: "v1", Kind: "ResourceClaimTemplate"}: func(raw []byte) (*claimObject, error) {
		o := &resourcev1.ResourceClaimTemplate{}
		if err := decode.Unmarshal(raw, o, decode.SkipManagedFields); err != nil {
			return nil, err
		}
		return &claimObject{meta: &o.ObjectMeta, spec: &o.Spec.Spec}, nil
	},
}

// claimReview is what decides whether a review of a claim or template
// reaches the policies.
type claimReview struct {
	kind string
	op   admissionv1.Operation
	// cur is the object; old the old object of an UPDATE, nil on CREATE or
	// when it does not decode.
	cur, old *claimObject
	// copier reports a requester that copies objects from templates
	// (injection.trustedRequesters, by default the kube-controller-manager's
	// identities): its resource claim controller makes each Pod's claims
	// from the templates the Pod names.
	copier bool
	// self reports modelgate's own service account: its claim template
	// controller makes the templates of the GPU claims it injects.
	self bool
}

// unjudgedClaim says why a review of a claim or template is not judged by
// the policies, "" when it is. As for every kind, an object being deleted
// is not judged, and neither is an UPDATE that changes nothing the view is
// built from (a claim's spec cannot change: such an update adds a
// finalizer or an owner). Two copies are not judged again, since what they
// copy was: the claim Kubernetes' resource claim controller makes for a Pod
// (its controller, by owner reference) from the template the Pod names,
// and the template modelgate makes for the GPU claim it injected into Pods
// the policies admitted. Both are believed on the requester's identity,
// which the API server authenticated, never on the object alone: a claim
// anyone else writes, with any owner, is judged.
func unjudgedClaim(r claimReview) string {
	switch {
	case r.op == admissionv1.Update && r.cur.meta.DeletionTimestamp != nil:
		return "the " + r.kind + " is being deleted"
	case r.op == admissionv1.Update && r.old != nil &&
		equality.Semantic.DeepEqual(r.cur.spec, r.old.spec) &&
		equality.Semantic.DeepEqual(r.cur.meta.Labels, r.old.meta.Labels) &&
		equality.Semantic.DeepEqual(r.cur.meta.Annotations, r.old.meta.Annotations):
		return "nothing the policies judge a " + r.kind + " by changed"
	case r.kind == "ResourceClaim" && r.copier && podControlled(r.cur.meta):
		return "made by Kubernetes for a Pod from the ResourceClaimTemplate it names, which was judged"
	case r.kind == "ResourceClaimTemplate" && r.self && r.cur.meta.Labels[gpuclaim.ManagedByLabel] == gpuclaim.ManagedBy:
		return "modelgate's template for the GPU claim it injected, judged with the Pods that name it"
	}
	return ""
}

// podControlled reports an object whose controller is a Pod.
func podControlled(m *metav1.ObjectMeta) bool {
	for _, o := range m.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "Pod" && o.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// judgeClaim is judge for a ResourceClaim or ResourceClaimTemplate: the
// same namespaces left alone, the same policies (those whose match names
// the kind), exceptions and ratcheting as a workload's review.
func (h *Validating) judgeClaim(ctx context.Context, req admission.Request, decode claimDecoder) (policies.Decision, bool, admission.Response, string) {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return policies.Decision{}, false, admission.Allowed("operation not handled by modelgate"), outcomeSkipped
	}
	if h.excluded.Has(req.Namespace) {
		return policies.Decision{}, false, admission.Allowed("namespace excluded"), outcomeSkipped
	}
	cur, err := decode(req.Object.Raw)
	if err != nil {
		return policies.Decision{}, false, admission.Errored(http.StatusBadRequest, err), outcomeBadRequest
	}
	nsLabels, resp, outcome := admittedNamespace(ctx, req, h.namespaces)
	if nsLabels == nil {
		return policies.Decision{}, false, resp, outcome
	}
	r := claimReview{kind: req.Kind.Kind, op: req.Operation, cur: cur,
		copier: isTrusted(req.UserInfo, h.copiers), self: h.self != "" && req.UserInfo.Username == h.self}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		r.old, _ = decode(req.OldObject.Raw) // judged as it stands when it does not decode
	}
	if why := unjudgedClaim(r); why != "" {
		return policies.Decision{}, false, admission.Allowed(why), outcomeSkipped
	}
	set := h.checker.Engine.Set()
	w := claimWorkload(req, cur, nsLabels)
	w.Set = set
	deadline := time.Now().Add(h.checker.Engine.Timeout())
	d := h.checker.Check(ctx, w)
	if r.old != nil && d.Ratchetable() {
		// As ratchet does for workloads: the old object, by the policies
		// that denied, within what is left of the budget.
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		oldReq := req
		oldReq.Object, oldReq.OldObject = req.OldObject, runtime.RawExtension{}
		ow := claimWorkload(oldReq, r.old, nsLabels)
		ow.Set = d.RatchetSet(set)
		d.Ratchet(h.checker.Check(ctx, ow))
	}
	return d, true, admission.Response{}, ""
}

// claimWorkload is what the policies judge of a claim or template: its
// metadata (its own for the pod's, as a Pod's are) and its claim spec.
func claimWorkload(req admission.Request, obj *claimObject, nsLabels map[string]string) *validators.Workload {
	w := requestWorkload(req, nsLabels)
	w.Object, w.PodMeta, w.Claim = obj.meta, obj.meta, obj.spec
	return w
}

// oldPodClaims are the claims an UPDATE's old Pod is judged with when it
// names any and is not scheduled yet: those that existed before the Pod
// was created (policyview.CreatedBefore). What a claim asks for is read as
// it is now, for the new Pod and the old alike; a claim created since the
// Pod (deleted and created again asking for more) would otherwise give the
// old Pod the new violation, and ratcheting would lift it. Once the Pod is
// scheduled its claims are allocated to it and cannot change, so they are
// read as they are, as before. nil for the checker's claims.
func (h *Validating) oldPodClaims(req admission.Request, prev *decode.Object) policyview.ClaimResolver {
	if req.Kind.Kind != "Pod" || len(prev.Target.PodSpec.ResourceClaims) == 0 {
		return nil
	}
	p := placementOf(req.OldObject.Raw)
	if p.scheduled() {
		return nil
	}
	return policyview.CreatedBefore(h.checker.Claims, p.Metadata.CreationTimestamp.Time)
}

// placement is what a stored Pod says of when it was admitted and where
// it runs: read from the raw old object of an UPDATE, which the view's
// decoding leaves out.
type placement struct {
	Metadata struct {
		CreationTimestamp metav1.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

// placementOf reads raw's placement; a zero one when it does not decode.
func placementOf(raw []byte) placement {
	var p placement
	if decode.Unmarshal(raw, &p) != nil {
		return placement{}
	}
	return p
}

// scheduled reports a Pod the scheduler has placed: its claims are
// allocated.
func (p placement) scheduled() bool { return p.Spec.NodeName != "" }
