package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// The markers below are the one source of the generated
// MutatingWebhookConfiguration (config/webhook/manifests.yaml) and of the
// RBAC the handler needs. Two webhooks share the handler: one for namespaces
// labelled modelgate.io/injection=enabled, one for objects that opt in by
// annotation elsewhere; config/webhook/kustomization.yaml adds the selectors
// and match conditions that keep everything else away from modelgate.

// +kubebuilder:webhookconfiguration:mutating=true,name=modelgate-mutating
// +kubebuilder:webhook:path=/mutate,mutating=true,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,reinvocationPolicy=IfNeeded,admissionReviewVersions=v1,groups="";apps;batch,resources=pods;deployments;statefulsets;jobs;cronjobs,verbs=create;update,versions=v1,name=namespace.inject.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system
// +kubebuilder:webhook:path=/mutate,mutating=true,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,reinvocationPolicy=IfNeeded,admissionReviewVersions=v1,groups="";apps;batch,resources=pods;deployments;statefulsets;jobs;cronjobs,verbs=create;update,versions=v1,name=annotation.inject.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// MutatePath is where the mutating webhook is served.
const MutatePath = "/mutate"

// reservedRule names the rule guarding modelgate's own metadata in denials.
const reservedRule = "reserved-metadata"

// Mutating is the one mutating admission handler: it decodes the object
// once, decides whether it opted in, builds the mutators' Input and runs the
// Chain, answering with a JSON patch and modelgate's warnings about what it
// injected ("[modelgate] message", see mutators.Warnings).
type Mutating struct {
	chain mutators.Chain
	// metadataOnly runs on Pod UPDATEs (a Pod's spec is immutable) and on
	// objects a controller stamps from an injected template: only metadata,
	// never the spec.
	metadataOnly mutators.Chain
	// forged strips reserved metadata modelgate did not seal from objects
	// that did not opt in, which a trusted controller creates from a
	// template modelgate never admitted.
	forged mutators.Chain
	// revert takes out what the chain injected from objects that no
	// longer opt in; owner metadata stays, as the record of who made them.
	revert     mutators.Chain
	parser     annotations.Parser
	options    *mutators.Options
	namespaces NamespaceLabeler
	excluded   sets.Set[string]
	trusted    *config.TrustedRequesters
	metrics    *Metrics
}

var _ admission.Handler = (*Mutating)(nil)

// NewMutating builds the handler from a configuration snapshot.
func NewMutating(cfg *config.Configuration, ns NamespaceLabeler, m *Metrics) *Mutating {
	owner := mutators.OwnerMetadata{}
	spec := mutators.Chain{mutators.ModelLoader{}, mutators.GPUPlacement{}, mutators.ServingProbes{}}
	return &Mutating{
		chain:        append(mutators.Chain{owner}, spec...),
		metadataOnly: mutators.Chain{owner},
		forged:       mutators.Chain{mutators.ForgedMetadata{}},
		revert:       spec,
		parser:       annotations.Parser{Profiles: cfg.Injection.Profiles},
		options:      mutatorOptions(cfg),
		namespaces:   ns,
		excluded:     excludedNamespaces(cfg),
		trusted:      trustedRequesters(cfg),
		metrics:      m,
	}
}

// Handle implements admission.Handler.
func (h *Mutating) Handle(ctx context.Context, req admission.Request) admission.Response {
	kind, op := req.Kind.Kind, string(req.Operation)
	resp, outcome := h.handle(ctx, req)
	h.metrics.review(kind, op, outcome)
	// The request's fields are added only to a line that is written:
	// adding them costs more than most reviews' own work. The logger is
	// the context's as it is (logf.FromContext would copy it).
	log, err := logr.FromContext(ctx)
	if err != nil {
		log = logf.Log
	}
	fields := func() []any {
		return []any{"kind", kind, "namespace", req.Namespace, "name", req.Name, "operation", op,
			"user", req.UserInfo.Username, "uid", req.UID, "outcome", outcome}
	}
	switch outcome {
	case outcomeError:
		log.Error(nil, "mutating review failed", append(fields(), "message", resp.Result.Message)...)
	case outcomeInjected:
		if l := log.V(1); l.Enabled() {
			l.Info("injected", append(fields(), "patches", len(resp.Patches))...)
		}
	default:
		if l := log.V(2); l.Enabled() {
			l.Info("reviewed", fields()...)
		}
	}
	return resp
}

func (h *Mutating) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	a, resp, outcome := admit(ctx, req, h.excluded, h.namespaces, true, decodeWhole)
	if a == nil {
		return resp, outcome
	}
	op, obj, old, nsLabels := a.op, a.obj, a.old, a.nsLabels
	sources := obj.AnnotationSources()
	paths := obj.AnnotationPaths()
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	settings, errs := h.parser.Parse(sources...)
	if injectErrs := onlyInject(errs); len(injectErrs) > 0 {
		return invalid(gk, req.Name, injectErrs), outcomeInvalid
	}

	requester := requesterFrom(req.UserInfo, h.trusted)
	in := &mutators.Input{
		Operation:       op,
		Namespace:       req.Namespace,
		NamespaceLabels: nsLabels,
		Requester:       requester,
		Settings:        settings,
		Container:       mutators.NoContainer,
		Options:         h.options,
	}
	if old != nil {
		in.Old = old.Target.Object
	}
	specFrozen := frozenSpec(req.Kind.Kind, op)
	stamped := isStamped(req.Kind.Kind, op, in, obj.Target)
	if !annotations.Decide(settings.Choice, nsLabels) {
		if errs := guardReserved(obj, old, requester); len(errs) > 0 {
			return forbidden(reservedRule, errs), outcomeForbidden
		}
		// A trusted controller copying a template modelgate never sealed
		// (a ReplicaSet a user wrote) passes on no owner and no record.
		if requester.Trusted && op == mutators.Create && mutators.Unsealed(obj.Target, in) {
			return h.mutate(req, obj, h.forged, modeForged, in)
		}
		// An object that opted out after modelgate injected it gets what
		// modelgate created taken out again. A Pod's spec cannot change
		// after creation, and an object a controller stamps from a
		// template follows the template.
		if !specFrozen && !stamped && mutators.HasRecord(obj.Target, in) {
			return h.mutate(req, obj, h.revert, modeRevert, in)
		}
		return admission.Allowed("not opted in"), outcomeSkipped
	}

	chain, mode := h.chain, modeInject
	switch {
	case specFrozen, stamped:
		chain, mode = h.metadataOnly, modeMetadata
	default:
		idx, ferr := mutators.ResolveContainer(obj.Target.PodSpec, settings, h.options.GPU.ResourceName, paths[len(paths)-1])
		if ferr != nil {
			errs = append(errs, ferr)
		}
		in.Container = idx
	}
	if len(errs) > 0 {
		return invalid(gk, req.Name, errs), outcomeInvalid
	}
	return h.mutate(req, obj, chain, mode, in)
}

// mode is what a pass of the handler does.
type mode int

const (
	// modeInject runs the full chain and writes the Injected record.
	modeInject mode = iota
	// modeMetadata runs the owner metadata only, on objects whose spec
	// modelgate must not change.
	modeMetadata
	// modeRevert takes out what modelgate injected and the record.
	modeRevert
	// modeForged takes reserved metadata modelgate did not seal off an
	// object that did not opt in.
	modeForged
)

// isStamped reports whether a CREATE is a controller stamping out an
// already-injected template (a ReplicaSet's Pod, a CronJob's Job): such
// objects carry modelgate's sealed record and get only their metadata
// checked, never a second injection. A record without a valid seal was not
// written by modelgate and skips nothing.
func isStamped(kind string, op mutators.Operation, in *mutators.Input, t *mutators.Target) bool {
	if op != mutators.Create || !in.Requester.Trusted || kind == "CronJob" {
		return false
	}
	_, ok := mutators.ParseRecord(t.PodMeta().Annotations[annotations.Injected])
	return ok && mutators.Sealed(t.PodMeta(), in)
}

// frozenSpec reports whether the API server refuses any change to the pod
// spec of an object of the kind on the operation: a Pod's spec and a Job's
// pod template cannot change once created. Such an UPDATE gets only its
// metadata checked; re-injecting it (a loader moved, a probe resized by a
// newer modelgate) would make the API server refuse the user's update.
func frozenSpec(kind string, op mutators.Operation) bool {
	return op == mutators.Update && (kind == "Pod" || kind == "Job")
}

// onlyInject keeps the errors about modelgate.io/inject: the only ones that
// matter for an object that did not opt in.
func onlyInject(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if strings.HasSuffix(e.Field, "["+annotations.Inject+"]") {
			out = append(out, e)
		}
	}
	return out
}

// mutate runs the chain over the decoded object and answers with the patch
// between the object before and after, both marshalled from the same typed
// value, so fields this build of modelgate does not know are never touched.
func (h *Mutating) mutate(req admission.Request, obj *decode.Object, chain mutators.Chain, m mode, in *mutators.Input) (admission.Response, string) {
	prev := mutators.PreviousRecord(obj.Target, in)
	snap := takeSnapshot(obj.Target, in.Container, prev)
	var (
		changed []string
		err     error
	)
	switch m {
	case modeInject:
		// Apply writes the record and seals last.
		var res mutators.Result
		res, err = chain.ApplyAfter(obj.Target, in, prev)
		changed = res.Changed
	case modeMetadata:
		// The metadata-only chain keeps the record modelgate wrote
		// earlier, and only that one: a record edited by hand goes back.
		changed, err = chain.Run(obj.Target, in)
		mutators.SetRecord(obj.Target, prev)
	case modeRevert:
		changed, err = chain.Revert(obj.Target, in)
	case modeForged:
		changed, err = chain.Run(obj.Target, in)
	}
	if err != nil {
		if ie, ok := errors.AsType[*mutators.InvalidError](err); ok {
			return invalid(schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}, req.Name, ie.Errs), outcomeInvalid
		}
		return admission.Errored(http.StatusInternalServerError, err), outcomeError
	}
	if m == modeMetadata || m == modeForged {
		// Last: every reserved value is now one modelgate chose (Apply
		// and Revert seal last themselves).
		mutators.SealMetadata(obj.Target, in)
	}
	ops := buildPatch(snap, obj.Target, obj.Paths)
	if len(ops) == 0 {
		if m == modeRevert || m == modeForged {
			return admission.Allowed("not opted in"), outcomeSkipped
		}
		return withWarnings(admission.Allowed("already injected"), m, obj, in), outcomeUnchanged
	}
	patch, err := encodePatch(ops)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err), outcomeError
	}
	h.metrics.changed(req.Kind.Kind, changed)
	switch m {
	case modeRevert:
		return patchResponse(patch, "reverted"), outcomeReverted
	case modeForged:
		return patchResponse(patch, "reserved metadata modelgate did not seal removed"), outcomeForged
	}
	return withWarnings(patchResponse(patch, "injected"), m, obj, in), outcomeInjected
}

// withWarnings adds modelgate's advice on the injected object to an
// answer of the full chain (mutators.Warnings), in the form the policies'
// warnings have: "[modelgate] message". Objects whose spec modelgate did
// not inject in this pass get none: a Pod a controller stamps from a
// template was warned about as the template.
func withWarnings(resp admission.Response, m mode, obj *decode.Object, in *mutators.Input) admission.Response {
	if m != modeInject {
		return resp
	}
	for _, w := range mutators.Warnings(obj.Target, in) {
		resp.Warnings = append(resp.Warnings, tagged(warningSource, w))
	}
	return resp
}
