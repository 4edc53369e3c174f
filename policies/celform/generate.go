package celform

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// Labels of what Generate makes: who manages it, and the WorkloadPolicy it
// stands for.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "modelgate"
	PolicyLabel    = "policy.modelgate.io/workloadpolicy"
)

// Scope is what the generated policies see besides a policy's own match:
// the validating webhooks' scope, so that the API server judges the objects
// modelgate would.
type Scope struct {
	// ExcludedNamespaces are never judged: the Configuration's
	// injection.excludedNamespaces and modelgate's own namespace.
	ExcludedNamespaces []string
	// IgnoredLabel, when set, leaves out the namespaces that carry it
	// (modelgate.io/ignore).
	IgnoredLabel string
	// MatchConditions narrow the policies to the objects the webhooks
	// judge (WebhookScope).
	MatchConditions []admissionregistrationv1.MatchCondition
	// InScope, when set, is a CEL expression over the object and
	// namespaceObject (which match conditions cannot read): a validation
	// holds wherever it is false.
	InScope string
	// Exceptions are the WorkloadPolicyExceptions in force: Generate keeps
	// those that name the policy (ExceptionsFor). The caller decides which
	// are in force, and generates again when one expires.
	Exceptions []policyv1.WorkloadPolicyException
}

// resourceRule is the API server's name of each kind a WorkloadPolicy can
// match. AIInferences are judged by the Deployment their controller makes:
// CEL cannot build the Deployment an AIInference becomes, as modelgate does.
var resourceRule = map[string]admissionregistrationv1.RuleWithOperations{
	"Pod":                   rule("", "pods", "pods/ephemeralcontainers"),
	"Deployment":            rule("apps", "deployments"),
	"StatefulSet":           rule("apps", "statefulsets"),
	"Job":                   rule("batch", "jobs"),
	"CronJob":               rule("batch", "cronjobs"),
	"ResourceClaim":         rule("resource.k8s.io", "resourceclaims"),
	"ResourceClaimTemplate": rule("resource.k8s.io", "resourceclaimtemplates"),
}

// workloadKinds are the kinds an empty match.kinds selects.
var workloadKinds = []string{"Pod", "Deployment", "StatefulSet", "Job", "CronJob"}

// rule is the CREATE and UPDATE of a resource (and its subresources
// listed after it: a debug container is added to a Pod through
// pods/ephemeralcontainers) at v1, the version every matched kind is
// served at (matchPolicy Equivalent brings the others).
func rule(group string, resources ...string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: resources,
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}
}

// Name is the name of the ValidatingAdmissionPolicy and binding generated
// for the WorkloadPolicy named policy: modelgate-<policy>, shortened with a
// digest when that would not fit an object name.
func Name(policy string) string {
	const maxName = 253
	n := "modelgate-" + policy
	if len(n) <= maxName {
		return n
	}
	sum := sha256.Sum256([]byte(policy))
	return n[:maxName-17] + "-" + hex.EncodeToString(sum[:8])
}

// Generate is the ValidatingAdmissionPolicy and binding that enforce wp's
// CEL form: the same match (kinds, namespaces, selectors, exclusions) within
// the webhooks' scope, the same action (deny, warn, and dryrun as audit
// annotations) and failure policy, every message prefixed "[name] " as
// modelgate's own. Both are owned by wp, so they go when it does. wp must
// carry a CEL form. The policy is deterministic: the same wp, keys and
// scope (exceptions in any order) give the same objects.
//
// A policy that denies (enforcementAction deny) also follows, as far as
// CEL can, what modelgate does beside its Rego:
//
//   - Exceptions: variables.excepted is whether one of s.Exceptions that
//     names wp covers the object (excepted), and a validation the object
//     fails holds where it is true. The API server admits such an object
//     silently, where modelgate turns the denial into a warning naming the
//     exception.
//   - Ratcheting (unless spec.ratchet is false): a validation the object
//     fails on an UPDATE holds where the old object failed it too with the
//     same message (its messageExpression, read on both; the message is
//     the same when there is none), as modelgate lifts a deny message the
//     old object had. See ratchetClause: its expression and every variable
//     it reads (modelgate's, the form's own) are read on oldObject, rewritten
//     in CEL's syntax tree, as copies of the variables named old_<name>.
//     Rego ratchets message by message across the whole policy; CEL
//     validation by validation: a message another validation gave the old
//     object lifts nothing, and a validation whose message lists several
//     violations (containers, say) ratchets only when the list is
//     unchanged, so an update that fixes one and keeps another is refused
//     where Rego admits it (stricter). A validation whose message does not
//     carry the value it judges ratchets any worse value of the old
//     violation (more lenient than a Rego message that does): give it a
//     messageExpression that does, as the Rego's message should.
//
// Each such validation is `!variables.inScope || ((E) ? true :
// variables.excepted || (request.operation == 'UPDATE' && oldObject !=
// null && !(E on oldObject) && (M) == (M on oldObject)))`: an error in E
// still fails the validation (failurePolicy decides), as an error of the
// Rego is never excepted or ratcheted. An error on the old object fails it
// too: denied with failurePolicy Fail, as modelgate keeps the denial when
// the old object cannot be judged, but admitted with Ignore (failurePolicy
// allow), where modelgate denies.
func Generate(wp *policyv1.WorkloadPolicy, k Keys, s Scope) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	g, err := generate(wp, k, s)
	if err != nil {
		return nil, nil, err
	}
	return g.vap, g.binding, nil
}

// generated is what generate makes, and where the form's own variables
// are among the policy's: from own to own+len(spec.cel.variables).
type generated struct {
	vap     *admissionregistrationv1.ValidatingAdmissionPolicy
	binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	own     int
}

func generate(wp *policyv1.WorkloadPolicy, k Keys, s Scope) (*generated, error) {
	form := wp.Spec.CEL
	if form == nil {
		return nil, fmt.Errorf("WorkloadPolicy %s has no spec.cel", wp.Name)
	}
	params, err := wp.Parameters()
	if err != nil {
		return nil, err
	}
	mine, err := Variables(k, params)
	if err != nil {
		return nil, err
	}
	inScope := "true"
	if s.InScope != "" {
		inScope = s.InScope
	}
	vars := append([]admissionregistrationv1.Variable{{Name: VarInScope, Expression: inScope}}, mine...)
	vars = append(vars, admissionregistrationv1.Variable{Name: VarExcepted, Expression: excepted(ExceptionsFor(wp.Name, s.Exceptions))})
	own := len(vars)
	for _, v := range form.Variables {
		vars = append(vars, admissionregistrationv1.Variable{Name: v.Name, Expression: v.Expression})
	}
	var old *oldSide
	if ratchets(wp) {
		old = newOldSide(slices.Concat(mine, vars[own:]))
	}
	prefix := quote("[" + wp.Name + "] ")
	validations := make([]admissionregistrationv1.Validation, len(form.Validations))
	for i, v := range form.Validations {
		msg := v.Message
		if msg == "" {
			// The API server refuses a message with line breaks: a
			// multi-line expression is quoted on one line.
			msg = "failed expression: " + strings.Join(strings.Fields(v.Expression), " ")
		}
		validations[i] = admissionregistrationv1.Validation{
			Expression: validation(wp, v, old),
			Message:    "[" + wp.Name + "] " + msg,
		}
		if v.MessageExpression != "" {
			// An empty message falls back to message, as the API server's own.
			validations[i].MessageExpression = `size(` + v.MessageExpression + `) == 0 ? '' : ` + prefix + ` + (` + v.MessageExpression + `)`
		}
	}
	if old != nil {
		copies, ok := old.copies()
		if !ok {
			// Cannot happen for what parsed; judge UPDATEs as CREATEs.
			for i, v := range form.Validations {
				validations[i].Expression = validation(wp, v, nil)
			}
		}
		vars = append(vars, copies...)
	}
	kinds := wp.Spec.Match.Kinds
	if len(kinds) == 0 {
		kinds = workloadKinds
	}
	var rules []admissionregistrationv1.NamedRuleWithOperations
	for _, kind := range kinds {
		if r, ok := resourceRule[kind]; ok {
			rules = append(rules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: r})
		}
	}
	failure := admissionregistrationv1.Fail
	if wp.Spec.FailurePolicy == policyv1.FailurePolicyAllow {
		failure = admissionregistrationv1.Ignore
	}
	meta := metav1.ObjectMeta{
		Name:   Name(wp.Name),
		Labels: map[string]string{ManagedByLabel: ManagedBy, PolicyLabel: wp.Name},
	}
	if wp.UID != "" {
		meta.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: policyv1.GroupVersion.String(), Kind: "WorkloadPolicy", Name: wp.Name, UID: wp.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: *meta.DeepCopy(),
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(failure),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				ResourceRules:     rules,
				MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
			},
			MatchConditions: slices.Clone(s.MatchConditions),
			Variables:       vars,
			Validations:     validations,
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: vap.Name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: namespaceSelector(wp.Spec.Match, s),
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
			},
			ValidationActions: actions(wp.Spec.EnforcementAction),
		},
	}
	return &generated{vap: vap, binding: binding, own: own}, nil
}

// validation is the expression of v as generated: v's expression where the
// webhooks judge the object; for a policy that denies, lifted where an
// exception covers the object, and, with old (a policy that ratchets),
// where the old object of an UPDATE failed it too with the same message.
func validation(wp *policyv1.WorkloadPolicy, v policyv1.CELValidation, old *oldSide) string {
	scope := "!variables." + VarInScope + " || "
	if !denies(wp) {
		return scope + "(" + v.Expression + ")"
	}
	lift := "variables." + VarExcepted
	if old != nil {
		if r := old.ratchetClause(v); r != "" {
			lift += " ||\n  (" + r + ")"
		}
	}
	return scope + "((" + v.Expression + ") ? true :\n  " + lift + ")"
}

// namespaceLabel is the label the API server sets on every namespace to
// its name.
const namespaceLabel = "kubernetes.io/metadata.name"

// namespaceSelector is the policy's namespaces, excluded namespaces and
// namespace selector, and the scope's exclusions, as one label selector:
// its requirements are ANDed, as WorkloadMatch's fields are.
func namespaceSelector(m policyv1.WorkloadMatch, s Scope) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{}
	if m.NamespaceSelector != nil {
		sel = m.NamespaceSelector.DeepCopy()
	}
	if len(m.Namespaces) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: namespaceLabel, Operator: metav1.LabelSelectorOpIn, Values: slices.Clone(m.Namespaces),
		})
	}
	if s.IgnoredLabel != "" {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: s.IgnoredLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
	out := slices.Concat(s.ExcludedNamespaces, m.ExcludedNamespaces)
	slices.Sort(out)
	if out = slices.Compact(out); len(out) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: namespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: out,
		})
	}
	return sel
}

// actions are the binding's validation actions for an enforcement action:
// a dry run is only recorded, in the audit annotations.
func actions(a policyv1.EnforcementAction) []admissionregistrationv1.ValidationAction {
	switch a {
	case policyv1.EnforcementActionWarn:
		return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn}
	case policyv1.EnforcementActionDryRun:
		return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
	default:
		return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	}
}
