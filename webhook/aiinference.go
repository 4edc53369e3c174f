package webhook

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// The AIInference webhooks are registered for v1 only: with matchPolicy
// Equivalent the API server converts an object written in any version to
// v1 (through /convert) before calling them, so one typed defaulter and one
// typed validator serve every version.

// +kubebuilder:webhook:path=/mutate-serving-modelgate-io-v1-aiinference,mutating=true,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups=serving.modelgate.io,resources=aiinferences,verbs=create;update,versions=v1,name=default.aiinference.serving.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system
// +kubebuilder:webhook:path=/validate-serving-modelgate-io-v1-aiinference,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups=serving.modelgate.io,resources=aiinferences,verbs=create;update,versions=v1,name=validate.aiinference.serving.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system

// registerAIInference serves the AIInference defaulter and validator, and
// /convert for its versions (controller-runtime registers the conversion
// webhook because v1alpha1 and v1beta1 convert to the v1 hub).
func registerAIInference(mgr manager.Manager, cfg *config.Configuration, engine *policies.Engine, ns NamespaceLabeler, pm *PolicyMetrics) error {
	err := builder.WebhookManagedBy(mgr, &servingv1.AIInference{}).
		WithDefaulter(NewAIInferenceDefaulter(cfg, ns)).
		WithValidator(NewAIInferenceValidator(cfg, engine, ns, pm)).
		RecoverPanic(true).
		Complete()
	if err != nil {
		return fmt.Errorf("registering the AIInference webhooks: %w", err)
	}
	return nil
}

// AIInferenceValidator rejects an invalid AIInference with every problem
// at its field path (422), then runs the workload policies over it through
// the same input.workload view as Pods and Deployments (403 on a denial,
// warnings otherwise).
type AIInferenceValidator struct {
	Policies    *validators.Policies
	GPUResource corev1.ResourceName
	Namespaces  NamespaceLabeler
	// Excluded namespaces are not judged by policies (structural checks
	// still apply).
	Excluded sets.Set[string]
	Metrics  *PolicyMetrics
}

var _ admission.Validator[*servingv1.AIInference] = (*AIInferenceValidator)(nil)

// NewAIInferenceValidator builds the validator from a configuration
// snapshot, the engine holding the policies in force and the namespace
// labels; policies skip the namespaces the Configuration excludes.
func NewAIInferenceValidator(cfg *config.Configuration, engine *policies.Engine, ns NamespaceLabeler, pm *PolicyMetrics) *AIInferenceValidator {
	return &AIInferenceValidator{
		Policies:    &validators.Policies{Engine: engine, GPU: gpuKeys(&cfg.Injection), Seal: recordKey(cfg)},
		GPUResource: corev1.ResourceName(cfg.Injection.GPU.ResourceName),
		Namespaces:  ns,
		Excluded:    excludedNamespaces(cfg),
		Metrics:     pm,
	}
}

// ValidateCreate implements admission.Validator.
func (v *AIInferenceValidator) ValidateCreate(ctx context.Context, obj *servingv1.AIInference) (admission.Warnings, error) {
	return v.validate(ctx, nil, obj)
}

// ValidateUpdate implements admission.Validator.
func (v *AIInferenceValidator) ValidateUpdate(ctx context.Context, old, obj *servingv1.AIInference) (admission.Warnings, error) {
	return v.validate(ctx, old, obj)
}

// ValidateDelete implements admission.Validator; deletes are not judged.
func (v *AIInferenceValidator) ValidateDelete(context.Context, *servingv1.AIInference) (admission.Warnings, error) {
	return nil, nil
}

var aiinferenceGK = schema.GroupKind{Group: servingv1.GroupVersion.Group, Kind: validators.AIInferenceKind}

func (v *AIInferenceValidator) validate(ctx context.Context, old, obj *servingv1.AIInference) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the admission request: %w", err)
	}
	op := string(req.Operation)
	settings, errs := validators.ValidateAIInference(obj, v.GPUResource)
	if len(errs) > 0 {
		v.Metrics.review(validators.AIInferenceKind, op, outcomeInvalid)
		return nil, apierrors.NewInvalid(aiinferenceGK, obj.Name, errs)
	}
	if v.Excluded.Has(obj.Namespace) {
		v.Metrics.review(validators.AIInferenceKind, op, outcomeSkipped)
		return nil, nil
	}
	nsLabels, err := v.Namespaces.NamespaceLabels(ctx, obj.Namespace)
	if err != nil {
		v.Metrics.review(validators.AIInferenceKind, op, outcomeError)
		return nil, apierrors.NewInternalError(err)
	}
	if ignoredNamespace(nsLabels) {
		v.Metrics.review(validators.AIInferenceKind, op, outcomeSkipped)
		return nil, nil
	}
	if old != nil && obj.DeletionTimestamp != nil {
		// Policies must not block cleanup (finalizers removed).
		v.Metrics.review(validators.AIInferenceKind, op, outcomeSkipped)
		return nil, nil
	}
	w := validators.AIInferenceWorkload(obj, settings, v.GPUResource, validators.AIInferenceRequest{
		Operation:       op,
		NamespaceLabels: nsLabels,
		UserInfo:        req.UserInfo,
		Raw:             req.Object.Raw,
		OldRaw:          req.OldObject.Raw,
	})
	deadline := time.Now().Add(v.Policies.Engine.Timeout())
	set := v.Policies.Engine.Set()
	w.Set = set
	decision := v.Policies.Check(ctx, w)
	if old != nil && decision.Ratchetable() {
		v.ratchet(ctx, deadline, req, old, nsLabels, set, &decision)
	}
	if old != nil && !decision.Allowed() && ownershipOnlyUpdate(req) {
		v.Metrics.review(validators.AIInferenceKind, op, outcomeSkipped)
		return nil, nil
	}
	logDecision(ctx, req, decision)
	warnings, outcome, err := policyVerdict(decision)
	v.Metrics.review(validators.AIInferenceKind, op, outcome)
	if err == nil {
		for _, a := range validators.AIInferenceAdvice(obj, settings) {
			warnings = append(warnings, tagged(warningSource, a))
		}
	}
	return warnings, err
}

// ratchet lifts the denials of an AIInference UPDATE that the old object
// had too, as Validating.ratchet does for workloads: the old object is
// judged by the policies that denied, within what is left of the review's
// budget. An old object that is not valid lifts nothing.
func (v *AIInferenceValidator) ratchet(ctx context.Context, deadline time.Time, req admission.Request, old *servingv1.AIInference, nsLabels map[string]string, set *policies.Set, d *policies.Decision) {
	settings, errs := validators.ValidateAIInference(old, v.GPUResource)
	if len(errs) > 0 {
		return
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	w := validators.AIInferenceWorkload(old, settings, v.GPUResource, validators.AIInferenceRequest{
		Operation:       string(req.Operation),
		NamespaceLabels: nsLabels,
		UserInfo:        req.UserInfo,
		Raw:             req.OldObject.Raw,
	})
	w.Set = d.RatchetSet(set)
	d.Ratchet(v.Policies.Check(ctx, w))
}

// policyVerdict is policyResponse for a typed validator: the warnings, a
// 403 status error when a policy denies, and the outcome label.
func policyVerdict(d policies.Decision) (admission.Warnings, string, error) {
	resp, outcome := policyResponse(d)
	if resp.Allowed {
		return resp.Warnings, outcome, nil
	}
	return resp.Warnings, outcome, &apierrors.StatusError{ErrStatus: *resp.Result}
}
