package webhook

import (
	"context"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook/decode"
)

// +kubebuilder:webhook:path=/validate-workloadpolicyexception,mutating=false,failurePolicy=fail,sideEffects=None,matchPolicy=Equivalent,timeoutSeconds=5,admissionReviewVersions=v1,groups=policy.modelgate.io,resources=workloadpolicyexceptions,verbs=create;update,versions=v1,name=workloadpolicyexception.validate.modelgate.io,serviceName=modelgate-webhook,serviceNamespace=modelgate-system

// ValidateExceptionPath is where WorkloadPolicyExceptions are validated.
const ValidateExceptionPath = "/validate-workloadpolicyexception"

// ExceptionValidator rejects a WorkloadPolicyException that names a policy
// not in force in its spec.policySource, has no reason, or expires too soon
// to ever apply (no more than policy.exceptions.clockSkew ahead) or further
// ahead than policy.exceptions.maxDuration, naming the field; it warns
// about a match that can select nothing the named policies judge. It reads
// the policies from the manager's cache and the engine: no API call.
type ExceptionValidator struct {
	// Policies reads WorkloadPolicies (the manager's cache).
	Policies client.Reader
	// Engine holds the policies in force, those of a policy directory
	// included.
	Engine *policies.Engine
	// Config is the Configuration's policy.exceptions, defaulted; a field
	// left nil has its default.
	Config config.Exceptions
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

var _ admission.Handler = (*ExceptionValidator)(nil)

var exceptionKind = schema.GroupKind{Group: policyv1.GroupVersion.Group, Kind: "WorkloadPolicyException"}

// Handle implements admission.Handler.
func (v *ExceptionValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	ex := &policyv1.WorkloadPolicyException{}
	if err := decode.Unmarshal(req.Object.Raw, ex); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *policyv1.WorkloadPolicyException
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		old = &policyv1.WorkloadPolicyException{}
		if err := decode.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	set := v.Engine.Set()
	errs, warnings := validators.ValidateException(ex, old, validators.ExceptionRules{
		Now:         now(),
		MaxDuration: duration(v.Config.MaxDuration, config.DefaultExceptionMaxDuration),
		ClockSkew:   duration(v.Config.ClockSkew, config.DefaultExceptionClockSkew),
		PolicyExists: func(source, name string) bool {
			return set.Has(source, name) || source == validators.SourceWorkloadPolicy && v.workloadPolicy(ctx, name) != nil
		},
		Policy: func(name string) *policyv1.WorkloadMatch {
			if wp := v.workloadPolicy(ctx, name); wp != nil {
				return &wp.Spec.Match
			}
			return nil
		},
	})
	if len(errs) > 0 {
		return invalid(exceptionKind, ex.Name, errs)
	}
	resp := admission.Allowed("")
	resp.Warnings = warnings
	return resp
}

// duration is d, or def when d is nil.
func duration(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// workloadPolicy is the named WorkloadPolicy from the cache, nil when
// there is none.
func (v *ExceptionValidator) workloadPolicy(ctx context.Context, name string) *policyv1.WorkloadPolicy {
	if v.Policies == nil {
		return nil
	}
	wp := &policyv1.WorkloadPolicy{}
	if err := v.Policies.Get(ctx, types.NamespacedName{Name: name}, wp); err != nil {
		return nil
	}
	return wp
}
