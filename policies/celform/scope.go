package celform

import (
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// The validating webhooks' scope (config/webhook/validating-selectors.yaml),
// which TestScopeAsTheWebhooks holds these to: three webhooks split the
// namespaces, and each sends only what its match conditions select.
const (
	// notAnUpdatePoliciesCannotSee leaves out a Pod, ResourceClaim or
	// ResourceClaimTemplate UPDATE that changes nothing the policies read.
	notAnUpdatePoliciesCannotSee = `!(request.kind.kind in ['Pod', 'ResourceClaim', 'ResourceClaimTemplate'] && request.operation == 'UPDATE' && oldObject != null &&
  (has(object.metadata.deletionTimestamp) ||
   (object.spec == oldObject.spec &&
    object.metadata.?labels.orValue({}) == oldObject.metadata.?labels.orValue({}) &&
    object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({}))))`
	// namespaceOptedIn is namespace.validate.modelgate.io's selection, in a
	// namespace labelled modelgate.io/injection=enabled: all but what
	// opts out, anything requesting GPUs, every claim and template.
	namespaceOptedIn = `request.kind.kind in ['ResourceClaim', 'ResourceClaimTemplate']
||
![object.?metadata, object.?spec.?template.?metadata,
  object.?spec.?jobTemplate.?metadata, object.?spec.?jobTemplate.?spec.?template.?metadata]
  .exists(m, m.hasValue() && m.value().?annotations[?'modelgate.io/inject'].orValue('') == 'false')
||
` + requestsGPUs
	// workloadOptedIn is workload.validate.modelgate.io's, in every other
	// namespace: what opts in by annotation, anything requesting GPUs,
	// every claim and template.
	workloadOptedIn = `request.kind.kind in ['ResourceClaim', 'ResourceClaimTemplate']
||
[object.?metadata, object.?spec.?template.?metadata,
  object.?spec.?jobTemplate.?metadata, object.?spec.?jobTemplate.?spec.?template.?metadata]
  .exists(m, m.hasValue() && m.value().?annotations[?'modelgate.io/inject'].orValue('false') != 'false')
||
` + requestsGPUs
	requestsGPUs = `[object.?spec, object.?spec.?template.?spec, object.?spec.?jobTemplate.?spec.?template.?spec]
  .exists(s, s.hasValue() &&
    (s.value().?resourceClaims.orValue([]).size() > 0 ||
     (s.value().?containers.orValue([]) + s.value().?initContainers.orValue([]))
       .exists(c, c.?resources.?claims.orValue([]).size() > 0 ||
         [c.?resources.?limits.orValue({}), c.?resources.?requests.orValue({})]
           .exists(r, r.exists(k, k.endsWith('/gpu') || k.startsWith('nvidia.com/mig-'))))))`
)

// The namespace labels the webhooks' selectors read.
const (
	injectionLabel   = "modelgate.io/injection"
	policyScopeLabel = "modelgate.io/policy-scope"
	ignoreLabel      = "modelgate.io/ignore"
)

// WebhookScope is the validating webhooks' scope for a Configuration's
// excluded namespaces (injection.excludedNamespaces and modelgate's own):
// a namespace labelled modelgate.io/policy-scope=all has every workload
// judged (scope.validate), one labelled modelgate.io/injection=enabled
// what does not opt out or requests GPUs (namespace.validate), any other
// what opts in or requests GPUs (workload.validate); modelgate.io/ignore
// namespaces none.
func WebhookScope(excluded []string) Scope {
	inScope := `namespaceObject.?metadata.?labels[?'` + policyScopeLabel + `'].orValue('') == 'all' ||
(namespaceObject.?metadata.?labels[?'` + injectionLabel + `'].orValue('') == 'enabled' ?
 (` + indent(namespaceOptedIn) + `) :
 (` + indent(workloadOptedIn) + `))`
	return Scope{
		ExcludedNamespaces: excluded,
		IgnoredLabel:       ignoreLabel,
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "not-an-update-policies-cannot-see", Expression: notAnUpdatePoliciesCannotSee},
		},
		// Match conditions cannot read the namespace (the API server gives
		// them no namespaceObject): the split by namespace label is a
		// variable every validation is conditioned on.
		InScope: inScope,
	}
}

// indent indents the lines after the first of a nested expression.
func indent(s string) string {
	return strings.ReplaceAll(s, "\n", "\n  ")
}

// KeysOf are the keys a Configuration gives modelgate's variables: its
// injection.gpu resource and product label.
func KeysOf(cfg *config.Configuration) Keys {
	return Keys{GPUResource: cfg.Injection.GPU.ResourceName, ProductLabel: cfg.Injection.GPU.ProductLabel}
}

// ScopeOf is the validating webhooks' scope under a Configuration
// (WebhookScope): its injection.excludedNamespaces and modelgate's own
// namespace excluded.
func ScopeOf(cfg *config.Configuration) Scope {
	return WebhookScope(append(slices.Clone(cfg.Injection.ExcludedNamespaces), cfg.Namespace))
}
