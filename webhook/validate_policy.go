package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// +kubebuilder:webhook:path=/validate-workloadpolicy,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups=policy.modelgate.io,resources=workloadpolicies,verbs=create;update,versions=v1,name=workloadpolicy.validate.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system

// ValidatePolicyPath is where WorkloadPolicy resources are validated.
const ValidatePolicyPath = "/validate-workloadpolicy"

// PolicyValidator rejects a WorkloadPolicy that would not load: a module
// that does not parse or compile (every problem with its line and column),
// one without deny or warn rules, bad parameters or match settings, or a
// CEL form (spec.cel) that does not compile as the API server would compile
// the ValidatingAdmissionPolicy made of it. A broken policy never reaches
// the engine or the API server.
type PolicyValidator struct {
	// GPU names the GPU resource and product label modelgate's CEL
	// variables read (injection.gpu); they do not change what compiles.
	GPU celform.Keys
}

var _ admission.Handler = PolicyValidator{}

var workloadPolicyKind = schema.GroupKind{Group: policyv1.GroupVersion.Group, Kind: "WorkloadPolicy"}

// Handle implements admission.Handler.
func (v PolicyValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	wp := &policyv1.WorkloadPolicy{}
	if err := decode.Unmarshal(req.Object.Raw, wp); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var errs field.ErrorList
	if _, err := validators.CompileWorkloadPolicy(ctx, wp); err != nil {
		errs = policyFieldErrors(err)
	}
	if errs = append(errs, celform.Check(wp, v.GPU)...); len(errs) > 0 {
		return invalid(workloadPolicyKind, wp.Name, errs)
	}
	return admission.Allowed("")
}

// policyFieldErrors names the field of each problem: spec.rego for the
// module's, with "line:column:" first, else the field the error names.
func policyFieldErrors(err error) field.ErrorList {
	ce, ok := errors.AsType[*policies.CompileError](err)
	if !ok {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	rego := field.NewPath("spec", "rego")
	out := make(field.ErrorList, 0, len(ce.Problems))
	for _, p := range ce.Problems {
		msg := p.Code + ": " + p.Message
		if p.Row > 0 {
			msg = fmt.Sprintf("%d:%d: %s", p.Row, p.Col, msg)
		}
		out = append(out, &field.Error{Type: field.ErrorTypeInvalid, Field: rego.String(), BadValue: field.OmitValueType{}, Detail: msg})
	}
	return out
}
