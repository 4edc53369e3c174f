package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/policies"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// The markers below generate the ValidatingWebhookConfiguration
// (config/webhook/manifests.yaml); config/webhook/validating-selectors.yaml
// adds the namespace selectors and match conditions that decide which
// workloads are sent (docs/policies.md, "Which workloads are checked").
// ResourceClaims and ResourceClaimTemplates are judged too
// (validate_claim.go).

// +kubebuilder:webhookconfiguration:mutating=false,name=modelgate-validating
// +kubebuilder:webhook:path=/validate,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups="";apps;batch;resource.k8s.io,resources=pods;pods/ephemeralcontainers;deployments;statefulsets;jobs;cronjobs;resourceclaims;resourceclaimtemplates,verbs=create;update,versions=v1,name=namespace.validate.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system
// +kubebuilder:webhook:path=/validate,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups="";apps;batch;resource.k8s.io,resources=pods;pods/ephemeralcontainers;deployments;statefulsets;jobs;cronjobs;resourceclaims;resourceclaimtemplates,verbs=create;update,versions=v1,name=workload.validate.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system
// +kubebuilder:webhook:path=/validate,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups="";apps;batch;resource.k8s.io,resources=pods;pods/ephemeralcontainers;deployments;statefulsets;jobs;cronjobs;resourceclaims;resourceclaimtemplates,verbs=create;update,versions=v1,name=scope.validate.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system

// ValidatePath is where the workload validating webhook is served.
const ValidatePath = "/validate"

// Validating runs the Rego policies over workloads after mutation: it sees
// what will run, the injected spec included. Denials answer 403 with one
// line per violation, "[policy] message"; warnings go back to the client as
// admission warnings in the same form; dry runs are only counted and
// logged.
type Validating struct {
	checker     *validators.Policies
	parser      annotations.Parser
	gpuResource corev1.ResourceName
	namespaces  NamespaceLabeler
	excluded    sets.Set[string]
	metrics     *PolicyMetrics
	// copiers are the controllers that copy objects from templates, and
	// self is modelgate's own user: the claims they make from what was
	// judged are not judged again (unjudgedClaim).
	copiers *config.TrustedRequesters
	self    string
	// salt begins every raw key of the handler's (rawReview): the view
	// depends on its configuration as well as on the object.
	salt [16]byte
}

var _ admission.Handler = (*Validating)(nil)

// NewValidating builds the handler from a configuration snapshot and the
// engine holding the policies in force.
func NewValidating(cfg *config.Configuration, engine *policies.Engine, ns NamespaceLabeler, m *PolicyMetrics) *Validating {
	return &Validating{
		checker:     &validators.Policies{Engine: engine, GPU: gpuKeys(&cfg.Injection), Seal: recordKey(cfg)},
		parser:      annotations.Parser{Profiles: cfg.Injection.Profiles},
		gpuResource: corev1.ResourceName(cfg.Injection.GPU.ResourceName),
		namespaces:  ns,
		excluded:    excludedNamespaces(cfg),
		metrics:     m,
		copiers:     cfg.Injection.TrustedRequesters,
		self:        cfg.ControllerUsername(),
		salt:        newKeySalt(),
	}
}

// Handle implements admission.Handler.
func (h *Validating) Handle(ctx context.Context, req admission.Request) admission.Response {
	kind, op := req.Kind.Kind, string(req.Operation)
	resp, outcome := h.handle(ctx, req)
	h.metrics.review(kind, op, outcome)
	if outcome == outcomeError {
		logf.FromContext(ctx).Error(nil, "validating review failed", "kind", kind, "namespace", req.Namespace,
			"name", req.Name, "uid", req.UID, "message", resp.Result.Message)
	}
	return resp
}

func (h *Validating) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	d, judged, resp, outcome := h.judge(ctx, req)
	if !judged {
		return resp, outcome
	}
	logDecision(ctx, req, d)
	return policyResponse(d)
}

// Judge is the validating review of req without the answer: the policies'
// results themselves, for the audit. judged is false when the review does
// not reach the policies (an excluded or ignored namespace, a kind or
// operation modelgate does not judge, an object that does not decode);
// resp is then the answer the webhook gives. Nothing is counted or logged.
func (h *Validating) Judge(ctx context.Context, req admission.Request) (d policies.Decision, judged bool, resp admission.Response) {
	d, judged, resp, _ = h.judge(ctx, req)
	return d, judged, resp
}

func (h *Validating) judge(ctx context.Context, req admission.Request) (policies.Decision, bool, admission.Response, string) {
	if decode, ok := claimDecoders[req.Kind]; ok {
		return h.judgeClaim(ctx, req, decode)
	}
	// The set in force now judges the review, and says what to decode:
	// what the policies' view is built from, with only the modelgate.io/
	// annotations unless a policy can read the others; the whole object
	// (but managedFields) when a policy reads the raw object, so that a
	// Pod UPDATE is compared as a whole.
	set := h.checker.Engine.Set()
	allAnnotations := set.ReadsWorkloadKey("annotations") || set.ReadsWorkloadKey("podAnnotations")
	// A repeat is answered from the request's bytes, before decoding.
	key := h.rawReview(ctx, req, set, allAnnotations)
	if key != nil {
		defer putKeyBuffer(key)
		if d, ok := h.checker.Engine.Recall(set, key); ok {
			return d, true, admission.Response{}, ""
		}
	}
	decode := judgedDecoding(allAnnotations, set.NeedsObjects())
	a, resp, outcome := admit(ctx, req, h.excluded, h.namespaces, false, decode)
	if a == nil {
		return policies.Decision{}, false, resp, outcome
	}
	obj, nsLabels := a.obj, a.nsLabels
	why, prev := unjudgedUpdate(req, obj, decode)
	if why != "" {
		return policies.Decision{}, false, admission.Allowed(why), outcomeSkipped
	}
	w := h.workload(req, obj, nsLabels)
	w.Set, w.Key = set, key
	// One evaluation budget for the review: judging the old object to
	// ratchet an UPDATE gets what the new one left, never a second budget
	// (a policy slow on the old object leaves the denial standing).
	deadline := time.Now().Add(h.checker.Engine.Timeout())
	d := h.checker.Check(ctx, w)
	h.ratchet(ctx, deadline, req, prev, nsLabels, decode, set, &d)
	if !d.Allowed() && ownershipOnlyUpdate(req) {
		// Checked on the denied path only: the allowed one never pays for
		// comparing the two objects.
		return policies.Decision{}, false, admission.Allowed("only finalizers or owner references changed"), outcomeSkipped
	}
	return d, true, admission.Response{}, ""
}

// ownershipMeta are the fields an UPDATE may change without being judged:
// who holds the object (finalizers, owner references, as the garbage
// collector and controllers change them) and what the API server keeps.
var ownershipMeta = []string{"finalizers", "ownerReferences", "resourceVersion", "generation", "managedFields"}

// ownershipOnlyUpdate reports whether an UPDATE changes nothing but
// ownershipMeta and the status: a controller adopting, releasing or
// finishing an object, which a policy must not block. Objects that do not
// decode are judged as they stand.
func ownershipOnlyUpdate(req admission.Request) bool {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 {
		return false
	}
	strip := func(raw []byte) (map[string]any, bool) {
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil {
			return nil, false
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok {
			for _, k := range ownershipMeta {
				delete(meta, k)
			}
		}
		return m, true
	}
	cur, ok := strip(req.Object.Raw)
	if !ok {
		return false
	}
	prev, ok := strip(req.OldObject.Raw)
	return ok && equality.Semantic.DeepEqual(cur, prev)
}

// ratchet lifts the denials of an UPDATE that the old object had too
// (policies.Decision.Ratchet). The old object is decoded and judged only
// when the new one has a denial a ratcheting policy gave, and only by the
// policies that gave one, of the set that judged the new one: the allowed
// path costs nothing. It gets what is left of the review's evaluation
// budget (deadline), and an old object that does not decode, or a policy
// that fails on it, lifts nothing. prev is the old object when the review
// already decoded it (a Pod's, for unjudgedUpdate), else nil.
func (h *Validating) ratchet(ctx context.Context, deadline time.Time, req admission.Request, prev *decode.Object, nsLabels map[string]string, decodeObj decodeFunc, set *policies.Set, d *policies.Decision) {
	if req.Operation != admissionv1.Update || len(req.OldObject.Raw) == 0 || !d.Ratchetable() {
		return
	}
	if prev == nil {
		var err error
		if prev, err = decodeObj(req.Kind, req.OldObject.Raw); err != nil {
			return
		}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	oldReq := req
	oldReq.Object, oldReq.OldObject = req.OldObject, runtime.RawExtension{}
	w := h.workload(oldReq, prev, nsLabels)
	w.Claims = h.oldPodClaims(req, prev)
	w.Set = d.RatchetSet(set)
	d.Ratchet(h.checker.Check(ctx, w))
}

// unjudgedUpdate says why an UPDATE is not judged by the policies, empty
// when it is. Policies must not block cleanup: an object of any kind being
// deleted is never judged, and neither is a Pod update that changes
// nothing the policies judge a Pod by (what decode keeps of its spec, labels and
// annotations: what the view is built from, or the whole object when a
// policy reads it), such as the
// job controller removing a finalizer from a finished Pod after a policy
// was tightened. Either would otherwise leave the Pod Terminating for
// ever. A Pod that names resource claims and is not scheduled yet is the
// exception: its view is also built from the claims as they are now, which
// may have changed since it was admitted and are not allocated yet, so
// every update the API server sends of it is judged (the match conditions
// send none that leaves its spec, labels and annotations as they were):
// the one that removes a scheduling gate above all, the last before the
// scheduler allocates the claims. decode decodes the old Pod as the new
// one was decoded; it is returned, for ratchet, when it was decoded (a
// judged Pod update).
func unjudgedUpdate(req admission.Request, obj *decode.Object, decodeObj decodeFunc) (string, *decode.Object) {
	if req.Operation != admissionv1.Update {
		return "", nil
	}
	cur := obj.Target
	if cur.Object.DeletionTimestamp != nil {
		return "the " + req.Kind.Kind + " is being deleted", nil
	}
	if req.Kind.Kind != "Pod" {
		return "", nil
	}
	old, err := decodeObj(req.Kind, req.OldObject.Raw)
	if err != nil {
		return "", nil // judged as it stands
	}
	prev := old.Target
	if equality.Semantic.DeepEqual(cur.PodSpec, prev.PodSpec) &&
		equality.Semantic.DeepEqual(cur.Object.Labels, prev.Object.Labels) &&
		equality.Semantic.DeepEqual(cur.Object.Annotations, prev.Object.Annotations) &&
		(len(cur.PodSpec.ResourceClaims) == 0 || placementOf(req.OldObject.Raw).scheduled()) {
		return "nothing the policies judge a Pod by changed", nil
	}
	return "", old
}

// workload is what the policies judge: the decoded object, its parsed
// annotations and the container serving its model.
func (h *Validating) workload(req admission.Request, obj *decode.Object, nsLabels map[string]string) *validators.Workload {
	paths := obj.AnnotationPaths()
	// Malformed annotations on an opted-in object were rejected by the
	// mutating webhook; on any other object the policies see what parsed.
	settings, _ := h.parser.Parse(obj.AnnotationSources()...)
	serving := ""
	if idx, ferr := mutators.ResolveContainer(obj.Target.PodSpec, settings, h.gpuResource, paths[len(paths)-1]); ferr == nil && idx >= 0 {
		serving = obj.Target.PodSpec.Containers[idx].Name
	}
	w := requestWorkload(req, nsLabels)
	w.Object, w.PodMeta, w.PodSpec = obj.Target.Object, obj.Target.PodMeta(), obj.Target.PodSpec
	w.Settings, w.ServingContainer = settings, serving
	return w
}

// requestWorkload is what the policies judge of any review from the
// request itself: its kind, operation, namespace (with its labels), user
// and raw objects. The caller adds what it decoded of the object.
func requestWorkload(req admission.Request, nsLabels map[string]string) *validators.Workload {
	return &validators.Workload{
		Kind:            req.Kind.Kind,
		APIVersion:      strings.TrimPrefix(req.Kind.Group+"/"+req.Kind.Version, "/"),
		Operation:       string(req.Operation),
		Namespace:       req.Namespace,
		NamespaceLabels: nsLabels,
		UserInfo:        req.UserInfo,
		Raw:             req.Object.Raw,
		OldRaw:          req.OldObject.Raw,
	}
}

// judgedDecoding is how the validating webhook decodes: what the policies'
// view is built from (decode.Views), every annotation kept when
// annotationsRead, else only the modelgate.io/ ones; the whole object, but
// for metadata.managedFields, when objectsRead (a policy reads
// input.object or input.oldObject).
func judgedDecoding(annotationsRead, objectsRead bool) decodeFunc {
	switch {
	case objectsRead:
		return decodeWholeButManagedFields
	case annotationsRead:
		return decodeViewAllAnnotations
	default:
		return decodeView
	}
}

func decodeWholeButManagedFields(gvk metav1.GroupVersionKind, raw []byte) (*decode.Object, error) {
	return decode.Whole[gvk](raw, decode.SkipManagedFields)
}

func decodeViewAllAnnotations(gvk metav1.GroupVersionKind, raw []byte) (*decode.Object, error) {
	return decode.Views[gvk](raw, true)
}

func decodeView(gvk metav1.GroupVersionKind, raw []byte) (*decode.Object, error) {
	return decode.Views[gvk](raw, false)
}

// policyResponse turns a decision into the admission answer and its
// outcome label.
func policyResponse(d policies.Decision) (admission.Response, string) {
	// A warning is an HTTP header: the API server drops one that is not a
	// single line, so multi-line messages (OPA's errors) are folded.
	warnings := d.Warnings()
	for i, w := range warnings {
		warnings[i] = strings.Join(strings.Fields(w), " ")
	}
	if denials := d.Denials(); len(denials) > 0 {
		resp := deny(&metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: strings.Join(denials, "\n"),
		})
		resp.Warnings = warnings
		return resp, outcomeDenied
	}
	resp := admission.Allowed("")
	if len(warnings) > 0 {
		resp.Warnings = warnings
		if len(d.ExceptedBy()) > 0 {
			return resp, outcomeExcepted
		}
		if d.Ratcheted() {
			return resp, outcomeRatcheted
		}
		return resp, outcomeWarned
	}
	return resp, outcomeAllowed
}

// logDecision logs what the user does not see in the answer, or must be
// found again later: dry-run violations, evaluation errors, and denials an
// exception allowed, with the policy and the exception.
func logDecision(ctx context.Context, req admission.Request, d policies.Decision) {
	log := logf.FromContext(ctx)
	for _, r := range d.Results {
		switch r.Decision() {
		case "dryrun":
			msgs := make([]string, 0, len(r.Deny)+len(r.Warn))
			for _, v := range append(append([]policies.Violation(nil), r.Deny...), r.Warn...) {
				msgs = append(msgs, v.Msg)
			}
			log.Info("dry-run policy violation", "policy", r.Policy, "source", r.Source, "kind", req.Kind.Kind,
				"namespace", req.Namespace, "name", req.Name, "uid", req.UID, "messages", msgs)
		case "excepted":
			for _, e := range r.Excepted {
				log.Info("policy denial allowed by exception", "policy", r.Policy, "source", r.Source,
					"exception", e.Exception.Ref(), "ticket", e.Exception.Ticket, "reason", e.Exception.Reason, "expiresAt", e.Exception.ExpiresAt.UTC().Format(time.RFC3339),
					"kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "uid", req.UID,
					"user", req.UserInfo.Username, "message", e.Msg)
			}
		case "error":
			// The policy's fault, not modelgate's: no error-level log.
			log.Info("policy evaluation failed", "policy", r.Policy, "source", r.Source, "error", r.Err.Error(),
				"failurePolicy", r.FailurePolicy, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "uid", req.UID)
		}
	}
}

// SetClaims makes the handler find what Pods' resource claims ask for
// through r (the CLI's manifests, the audit's cache) instead of knowing
// only modelgate's own claim.
func (h *Validating) SetClaims(r policyview.ClaimResolver) { h.checker.Claims = r }
