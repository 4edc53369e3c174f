package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/webhook"
)

// handled are the kinds modelgate's webhooks take (the resources of the
// markers in webhook/mutate.go and webhook/validate.go), keyed by
// apiVersion and kind.
var handled = map[[2]string]metav1.GroupVersionResource{
	{"v1", "Pod"}:              {Group: "", Version: "v1", Resource: "pods"},
	{"apps/v1", "Deployment"}:  {Group: "apps", Version: "v1", Resource: "deployments"},
	{"apps/v1", "StatefulSet"}: {Group: "apps", Version: "v1", Resource: "statefulsets"},
	{"batch/v1", "Job"}:        {Group: "batch", Version: "v1", Resource: "jobs"},
	{"batch/v1", "CronJob"}:    {Group: "batch", Version: "v1", Resource: "cronjobs"},
	// Judged by what they ask for (webhook/validate_claim.go).
	{claimAPIVersion, "ResourceClaim"}:         {Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims"},
	{claimAPIVersion, "ResourceClaimTemplate"}: {Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"},
	// AIInference in every served version: converted to v1 first.
	{"serving.modelgate.io/v1", "AIInference"}:       aiinferenceGVR,
	{"serving.modelgate.io/v1beta1", "AIInference"}:  aiinferenceGVR,
	{"serving.modelgate.io/v1alpha1", "AIInference"}: aiinferenceGVR,
}

// claimAPIVersion is the version of ResourceClaims and ResourceClaimTemplates
// modelgate judges.
const claimAPIVersion = "resource.k8s.io/v1"

// Handles reports whether modelgate's webhooks take objects of the
// apiVersion and kind.
func Handles(apiVersion, kind string) bool {
	_, ok := handled[[2]string{apiVersion, kind}]
	return ok
}

// Decision is what admission did with an object.
type Decision string

// Decisions, in the words `modelgate render` prints and case files expect.
const (
	Allowed Decision = "allowed"
	Warned  Decision = "warned"
	Denied  Decision = "denied"
)

// Decisions are the valid Decision values.
var Decisions = []Decision{Allowed, Warned, Denied}

// Outcome is the answer of the webhooks for one object.
type Outcome struct {
	Decision Decision
	// Denials are the lines of a denial: "[policy] message" from the
	// policies, or the mutating webhook's message for malformed
	// annotations (422) or hand-set reserved metadata (403).
	Denials []string
	// Warnings are the admission warnings, "[policy] message".
	Warnings []string
	// Object is the object after mutation, as JSON: the input itself when
	// the mutating webhook changed nothing or denied it.
	Object []byte
	// Mutated reports whether the mutating webhook patched the object.
	Mutated bool
	// Checked reports whether the object reached the policies; Skipped
	// says why not.
	Checked bool
	Skipped string
	// CEL is what the API server decides with the policies' CEL forms
	// (their generated ValidatingAdmissionPolicies in force), on the object
	// as mutated; nil when no policy has one, or the mutating webhook
	// denied the object.
	CEL *CELOutcome
}

// CELOutcome is the decision of the policies' CEL forms on one object.
type CELOutcome struct {
	// Policies are the names of the policies with a CEL form; Warning
	// those of them whose violations are warnings (enforcementAction warn).
	Policies []string
	Warning  []string
	// Denials and Warnings are their "[policy] message" lines.
	Denials, Warnings []string
}

// Disagreements are the policies whose Rego and CEL forms decide the
// object differently, one line each: one denies (or, for a policy whose
// enforcementAction is warn, warns) and the other does not. A dry-run
// policy shows nothing in either, and is not compared.
//
// failsClosed names the policies whose CEL form is expected to deny the
// object where Rego allows it, because CEL cannot see what Rego does (a
// resource claim's template, a sealed record): for them that is the
// agreement, and anything else a disagreement.
func (o *Outcome) Disagreements(failsClosed ...string) []string {
	var out []string
	if o.CEL == nil {
		for _, name := range failsClosed {
			out = append(out, fmt.Sprintf("policy %s: expected to fail closed in CEL, but no CEL form judged the object", name))
		}
		return out
	}
	for _, name := range failsClosed {
		if !slices.Contains(o.CEL.Policies, name) {
			out = append(out, fmt.Sprintf("policy %s: expected to fail closed in CEL, but it has no CEL form", name))
		}
	}
	for _, name := range o.CEL.Policies {
		prefix := "[" + name + "] "
		has := func(lines []string) bool {
			return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
		}
		verb := "denies"
		rego, cel := o.Decision == Denied && has(o.Denials), has(o.CEL.Denials)
		if slices.Contains(o.CEL.Warning, name) {
			verb = "warns"
			rego, cel = has(o.Warnings), has(o.CEL.Warnings)
		}
		if slices.Contains(failsClosed, name) {
			switch {
			case rego:
				out = append(out, fmt.Sprintf("policy %s: expected to fail closed in CEL, but Rego %s too", name, verb))
			case !cel:
				out = append(out, fmt.Sprintf("policy %s: expected to fail closed in CEL, but its CEL form allows the object", name))
			}
			continue
		}
		switch {
		case rego && !cel:
			out = append(out, fmt.Sprintf("policy %s: Rego %s, its CEL form does not", name, verb))
		case cel && !rego:
			out = append(out, fmt.Sprintf("policy %s: its CEL form %s, Rego does not", name, verb))
		}
	}
	return out
}

// Request is one object to admit as a CREATE.
type Request struct {
	// Object is the object as JSON; its metadata.namespace may be unset.
	Object []byte
	// OldObject, when set, makes the request an UPDATE from it to Object:
	// the old object goes through the mutating webhook as it was created
	// (as stored), and is not judged itself.
	OldObject []byte
	// Namespace is the namespace it is created in.
	Namespace string
	// User is the requester.
	User authenticationv1.UserInfo
}

// Admitter sends objects through the mutating and validating handlers as
// the API server would: mutation first, its patch applied, then the
// policies on the mutated object.
type Admitter struct {
	aiinference *aiinferences
	mutating    *webhook.Mutating
	validating  *webhook.Validating
	namespaces  webhook.NamespaceLabeler
	gpuResource string
	engine      *policies.Engine
	cel         *CELForms
}

// SetCEL makes the admitter judge each object with the policies' CEL forms
// too, as the API server would (LoadPoliciesWithCEL), with the exceptions the
// engine applies.
func (a *Admitter) SetCEL(f *CELForms) { a.cel = f }

// NewAdmitter builds the webhook's handlers from the configuration, the
// engine holding the policies and the namespace labels. Metrics are not
// registered anywhere.
func NewAdmitter(cfg *config.Configuration, engine *policies.Engine, ns webhook.NamespaceLabeler) (*Admitter, error) {
	ai, err := newAIInferences(cfg, engine, ns)
	if err != nil {
		return nil, err
	}
	return &Admitter{
		aiinference: ai,
		mutating:    webhook.NewMutating(cfg, ns, webhook.NewMetrics(nil)),
		validating:  webhook.NewValidating(cfg, engine, ns, webhook.NewPolicyMetrics(nil)),
		namespaces:  ns,
		gpuResource: cfg.Injection.GPU.ResourceName,
		engine:      engine,
	}, nil
}

// SetClaims makes the policies find what Pods' resource claims ask for
// through r (the templates and claims among the manifests).
func (a *Admitter) SetClaims(r policyview.ClaimResolver) { a.validating.SetClaims(r) }

// NewEngine returns an engine evaluating the policies under the
// configuration's evaluation timeout, as the server's does.
func NewEngine(cfg *config.Configuration, cs []*policies.Compiled) *policies.Engine {
	o := policies.Options{}
	if t := cfg.Policy.EvaluationTimeout; t != nil {
		o.Timeout = t.Duration
	}
	e := policies.NewEngine(o)
	e.Swap(policies.NewSet(cs...))
	return e
}

// ErrWebhook marks an answer that is neither an admission nor a denial:
// the object cannot be decoded (400), or modelgate failed (500).
var ErrWebhook = errors.New("webhook error")

// Admit runs one object through the webhooks. Objects of kinds modelgate
// does not handle are allowed unchanged. The error is for an object the
// webhooks cannot judge (ErrWebhook) or a patch that does not apply.
func (a *Admitter) Admit(ctx context.Context, r Request) (Outcome, error) {
	ti, err := ReadTypeInfo(r.Object)
	if err != nil {
		return Outcome{}, err
	}
	gvr, ok := handled[[2]string{ti.APIVersion, ti.Kind}]
	if !ok {
		return Outcome{Decision: Allowed, Object: r.Object, Skipped: "not a kind modelgate handles"}, nil
	}
	if gvr == aiinferenceGVR {
		if r.OldObject != nil {
			return Outcome{}, errors.New("oldObject: an UPDATE of an AIInference is not supported offline")
		}
		return a.aiinference.admit(ctx, r, ti.Metadata.Name)
	}
	// The API server sends the object with its namespace set.
	sent, err := setNamespace(r.Object, r.Namespace)
	if err != nil {
		return Outcome{}, err
	}
	req := createRequest(gvr, ti.Kind, ti.Metadata.Name, r, sent)
	out := Outcome{Object: r.Object}
	if r.OldObject != nil {
		if req, err = a.updateRequest(ctx, req, r, ti); err != nil {
			return Outcome{}, err
		}
		sent, out.Object = req.Object.Raw, req.Object.Raw
	}

	resp := a.mutating.Handle(ctx, req)
	out.Warnings = append(out.Warnings, resp.Warnings...)
	if !resp.Allowed {
		return denial(out, resp, "mutating")
	}
	if len(resp.Patch) > 0 {
		if sent, err = applyPatch(sent, resp.Patch); err != nil {
			return Outcome{}, err
		}
		if out.Object, err = applyPatch(r.Object, resp.Patch); err != nil {
			return Outcome{}, err
		}
		out.Mutated = true
	}

	nsLabels, err := a.namespaces.NamespaceLabels(ctx, r.Namespace)
	if err != nil {
		return Outcome{}, fmt.Errorf("namespace %q: %w", r.Namespace, err)
	}
	if out.CEL, err = a.judgeCEL(ctx, req, sent, nsLabels); err != nil {
		return Outcome{}, err
	}
	if ok, why, err := SentToPolicies(sent, nsLabels, a.gpuResource); err != nil {
		return Outcome{}, err
	} else if !ok {
		out.Skipped = why
		return decided(out), nil
	}
	return check(ctx, a.validating, req, sent, out, "validating")
}

// judgeCEL judges the object as mutated (sent) with the policies' CEL
// forms, as the API server would; nil without any. The policies are those
// modelgate would generate with the exceptions the engine holds that are
// in force at its clock, and ratchet an UPDATE as the API server does: the
// request's old object is the one stored.
func (a *Admitter) judgeCEL(ctx context.Context, req admission.Request, sent []byte, nsLabels map[string]string) (*CELOutcome, error) {
	if a.cel.Len() == 0 {
		return nil, nil
	}
	ps, err := a.cel.Policies(exceptionsInForce(a.engine.Exceptions()))
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(sent); err != nil {
		return nil, fmt.Errorf("the object for the CEL forms: %w", err)
	}
	var old *unstructured.Unstructured
	if req.Operation == admissionv1.Update {
		old = &unstructured.Unstructured{}
		if err := old.UnmarshalJSON(req.OldObject.Raw); err != nil {
			return nil, fmt.Errorf("the old object for the CEL forms: %w", err)
		}
	}
	labels := maps.Clone(nsLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelMetadataName] = req.Namespace
	cr := celform.Request{
		Object: obj, OldObject: old, Operation: apiadmission.Operation(req.Operation),
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: req.Namespace, Labels: labels}},
		UserInfo:  &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups},
	}
	out := &CELOutcome{}
	for _, p := range ps {
		out.Policies = append(out.Policies, p.PolicyName())
		if p.Warns() {
			out.Warning = append(out.Warning, p.PolicyName())
		}
		d, err := p.Judge(ctx, cr)
		if err != nil {
			return nil, fmt.Errorf("the CEL form of %s: %w", p.PolicyName(), err)
		}
		out.Denials = append(out.Denials, d.Deny...)
		out.Warnings = append(out.Warnings, d.Warn...)
	}
	return out, nil
}

// createRequest is the request the API server sends the webhooks when r's
// user creates the object sent (r's object with its namespace set), of
// kind in gvr, named name.
func createRequest(gvr metav1.GroupVersionResource, kind, name string, r Request, sent []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "00000000-0000-0000-0000-000000000000",
		Kind:      metav1.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: kind},
		Resource:  gvr,
		Name:      name,
		Namespace: r.Namespace,
		Operation: admissionv1.Create,
		UserInfo:  r.User,
		Object:    runtime.RawExtension{Raw: sent},
	}}
}

// check sends the object as the mutating step left it (sent) to a
// validating handler and decides the outcome; which names the handler in
// a denial.
func check(ctx context.Context, h admission.Handler, req admission.Request, sent []byte, out Outcome, which string) (Outcome, error) {
	out.Checked = true
	req.Object.Raw = sent
	resp := h.Handle(ctx, req)
	out.Warnings = append(out.Warnings, resp.Warnings...)
	if !resp.Allowed {
		return denial(out, resp, which)
	}
	return decided(out), nil
}

// decided sets the decision of an admitted object.
func decided(out Outcome) Outcome {
	out.Decision = Allowed
	if len(out.Warnings) > 0 {
		out.Decision = Warned
	}
	return out
}

// denial turns a refusal into a Denied outcome, or an error when it is not
// a judgement of the object (a bad request or modelgate's own failure).
func denial(out Outcome, resp admission.Response, which string) (Outcome, error) {
	code, msg := int32(http.StatusForbidden), ""
	if resp.Result != nil {
		code, msg = resp.Result.Code, resp.Result.Message
	}
	if code != http.StatusForbidden && code != http.StatusUnprocessableEntity {
		return Outcome{}, fmt.Errorf("%w: the %s webhook answered %d: %s", ErrWebhook, which, code, msg)
	}
	out.Decision = Denied
	out.Denials = strings.Split(msg, "\n")
	return out, nil
}

// applyPatch applies a JSON patch as the API server does. Missing parents
// of an added path are created: the patch is computed against the object
// as the API server would send it, where empty sections the manifest
// leaves out (a CronJob's jobTemplate.metadata) are present.
func applyPatch(doc, patch []byte) ([]byte, error) {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, fmt.Errorf("decoding the mutating webhook's patch: %w", err)
	}
	o := jsonpatch.NewApplyOptions()
	o.EnsurePathExistsOnAdd = true
	out, err := p.ApplyWithOptions(doc, o)
	if err != nil {
		return nil, fmt.Errorf("applying the mutating webhook's patch: %w", err)
	}
	return out, nil
}

// setNamespace sets metadata.namespace, leaving the rest of the object as
// it is.
func setNamespace(obj []byte, ns string) ([]byte, error) {
	value, err := json.Marshal(ns)
	if err != nil {
		return nil, fmt.Errorf("setting the namespace: %w", err)
	}
	op, err := jsonpatch.DecodePatch(fmt.Appendf(nil, `[{"op":"add","path":"/metadata/namespace","value":%s}]`, value))
	if err != nil {
		return nil, fmt.Errorf("setting the namespace: %w", err)
	}
	o := jsonpatch.NewApplyOptions()
	o.EnsurePathExistsOnAdd = true
	out, err := op.ApplyWithOptions(obj, o)
	if err != nil {
		return nil, fmt.Errorf("setting the namespace: %w", err)
	}
	return out, nil
}

// updateRequest turns req, the creation of r's object, into its UPDATE
// from r.OldObject, which must be the same kind, name and namespace. Both
// are taken as the API server holds them: the old object as the mutating
// webhook admitted its creation, the new one as that stored object with
// the case's change (what `kubectl apply`, `label` or a controller sends:
// the injection kept, as a Job's frozen template must be).
func (a *Admitter) updateRequest(ctx context.Context, req admission.Request, r Request, ti TypeInfo) (admission.Request, error) {
	oti, err := ReadTypeInfo(r.OldObject)
	if err != nil {
		return req, fmt.Errorf("oldObject: %w", err)
	}
	if oti.APIVersion != ti.APIVersion || oti.Kind != ti.Kind || oti.Metadata.Name != ti.Metadata.Name ||
		(oti.Metadata.Namespace != "" && oti.Metadata.Namespace != r.Namespace) {
		return req, fmt.Errorf("oldObject: %s %s %q must be the object's own old version (%s %s %q in %q)",
			oti.APIVersion, oti.Kind, oti.Metadata.Name, ti.APIVersion, ti.Kind, ti.Metadata.Name, r.Namespace)
	}
	old, err := setNamespace(r.OldObject, r.Namespace)
	if err != nil {
		return req, err
	}
	if old, err = a.asStored(ctx, req, old); err != nil {
		return req, fmt.Errorf("oldObject: %w", err)
	}
	cur, err := a.asStored(ctx, req, req.Object.Raw)
	if err != nil {
		return req, fmt.Errorf("object: %w", err)
	}
	req.Operation = admissionv1.Update
	req.Object = runtime.RawExtension{Raw: cur}
	req.OldObject = runtime.RawExtension{Raw: old}
	return req, nil
}

// asStored is raw as the API server stores it when create (a CREATE
// request) admits it: with the mutating webhook's patch applied.
func (a *Admitter) asStored(ctx context.Context, create admission.Request, raw []byte) ([]byte, error) {
	create.Object.Raw = raw
	resp := a.mutating.Handle(ctx, create)
	if !resp.Allowed {
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		return nil, fmt.Errorf("the mutating webhook refuses it: %s", msg)
	}
	if len(resp.Patch) == 0 {
		return raw, nil
	}
	return applyPatch(raw, resp.Patch)
}
