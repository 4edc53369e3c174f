/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnforcementAction is what a policy's deny messages do to an admission
// request.
// +kubebuilder:validation:Enum=deny;warn;dryrun
type EnforcementAction string

const (
	// EnforcementActionDeny rejects the request with the deny messages (the
	// default).
	EnforcementActionDeny EnforcementAction = "deny"
	// EnforcementActionWarn admits the request and returns the deny messages
	// as warnings.
	EnforcementActionWarn EnforcementAction = "warn"
	// EnforcementActionDryRun evaluates the policy but shows nothing to the
	// user: the results are only logged and counted in metrics.
	EnforcementActionDryRun EnforcementAction = "dryrun"
)

// FailurePolicy is what an error while evaluating a policy does to an
// admission request.
// +kubebuilder:validation:Enum=deny;allow
type FailurePolicy string

const (
	// FailurePolicyDeny rejects the request when the policy cannot be
	// evaluated (the default).
	FailurePolicyDeny FailurePolicy = "deny"
	// FailurePolicyAllow admits the request, with a warning, when the policy
	// cannot be evaluated.
	FailurePolicyAllow FailurePolicy = "allow"
)

// ConditionReady is the condition type that says whether a WorkloadPolicy
// compiled and is being enforced.
const ConditionReady = "Ready"

// Reasons of the Ready condition.
const (
	// ReasonCompiled: the module compiled and the policy is enforced
	// (status True).
	ReasonCompiled = "Compiled"
	// ReasonCompileError: the module does not parse, does not compile or
	// does not follow the deny/warn contract; status.errors has the
	// positions (status False).
	ReasonCompileError = "CompileError"
	// ReasonInvalidParameters: spec.parameters or spec.match cannot be used
	// (status False).
	ReasonInvalidParameters = "InvalidParameters"
)

// WorkloadPolicySpec is the desired state of a WorkloadPolicy.
type WorkloadPolicySpec struct {
	// rego is the policy: a Rego v1 module that defines the set rules deny
	// and/or warn. Each message in deny is handled as enforcementAction says;
	// each message in warn is returned to the user as a warning. The module
	// reads the workload under input and spec.parameters under
	// input.parameters.
	// +required
	// +kubebuilder:validation:MinLength=1
	Rego string `json:"rego"`

	// enforcementAction is what the deny messages do: "deny" rejects the
	// request, "warn" admits it and returns the messages as warnings,
	// "dryrun" only logs them.
	// +optional
	// +kubebuilder:default=deny
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`

	// failurePolicy is what happens when the policy cannot be evaluated (an
	// error or a timeout at admission time): "deny" rejects the request,
	// "allow" admits it with a warning.
	// +optional
	// +kubebuilder:default=deny
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// ratchet judges an UPDATE by what it introduces: a deny message the
	// old object gave too (same policy, same message but for the object's
	// name) does not deny the update; it comes back as the warning
	// "[policy] existing violation, not introduced by this update: ...".
	// New violations still deny. false judges an update as if the object
	// were new. Default true.
	// +optional
	// +kubebuilder:default=true
	Ratchet *bool `json:"ratchet,omitempty"`

	// match selects the workloads the policy applies to. When it is empty
	// the policy applies to every workload the webhook sees.
	// +optional
	Match WorkloadMatch `json:"match,omitzero"`

	// parameters is a free-form object given to the policy as
	// input.parameters, so that one module can serve several policies with
	// different settings (allowed GPU products, a maximum GPU count, ...).
	// When unset, input.parameters is an empty object.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`

	// cel is the policy's CEL form: validations over the admitted object
	// that modelgate turns into a ValidatingAdmissionPolicy and its binding,
	// which the API server enforces itself, also while modelgate is down
	// (docs/policies.md, "Writing the CEL form"). It reads the object,
	// modelgate's variables (variables.gpus, variables.podSpec, ...) and
	// spec.parameters as variables.parameters. A CEL form that does not
	// compile refuses the policy, as Rego that does not compile does.
	// +optional
	CEL *CELForm `json:"cel,omitempty"`
}

// CELForm is a WorkloadPolicy's validations in CEL, the language of the
// API server's ValidatingAdmissionPolicies.
type CELForm struct {
	// variables are named CEL expressions, evaluated in order after
	// modelgate's own; a validation, a message expression or a later
	// variable reads one as variables.<name>. Their names may not be one of
	// modelgate's.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Variables []CELVariable `json:"variables,omitempty"`

	// validations are CEL expressions that must each be true for the
	// object to be admitted; each false one is a violation, handled as
	// spec.enforcementAction says.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Validations []CELValidation `json:"validations"`
}

// CELVariable is a named CEL expression.
type CELVariable struct {
	// name is the variable's name: a CEL identifier.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// expression is the CEL expression whose value the variable holds.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=5000
	Expression string `json:"expression"`
}

// CELValidation is one rule of a CEL form.
type CELValidation struct {
	// expression is a CEL expression that evaluates to true when the object
	// follows the rule.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=5000
	Expression string `json:"expression"`

	// message is what a violation says, after "[policy-name] ". Defaults
	// to the expression.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// messageExpression is a CEL expression evaluating to the message, for
	// messages that name what they found; message is used when it fails or
	// evaluates to an empty string.
	// +optional
	// +kubebuilder:validation:MaxLength=5000
	MessageExpression string `json:"messageExpression,omitempty"`
}

// WorkloadMatch selects workloads. Every field that is set must match; an
// empty WorkloadMatch matches every workload.
type WorkloadMatch struct {
	// kinds are the workload kinds the policy applies to. When empty it
	// applies to every workload kind. ResourceClaim and
	// ResourceClaimTemplate (resource.k8s.io/v1), which are judged by what
	// they ask for, are matched only when listed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=Pod;Deployment;StatefulSet;Job;CronJob;AIInference;ResourceClaim;ResourceClaimTemplate
	Kinds []string `json:"kinds,omitempty"`

	// namespaces are the names of the namespaces the policy applies to,
	// compared exactly. When empty it applies in every namespace.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// excludedNamespaces are the names of namespaces the policy never
	// applies to, compared exactly. They win over namespaces and
	// namespaceSelector.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`

	// namespaceSelector selects the namespaces the policy applies to by
	// their labels. When unset, or empty, it selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// WorkloadPolicyStatus is the observed state of a WorkloadPolicy.
type WorkloadPolicyStatus struct {
	// observedGeneration is the metadata.generation of the spec that the
	// conditions and errors describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the policy's state. The Ready condition is True
	// (reason Compiled) when the policy is enforced, and False (reason
	// CompileError or InvalidParameters) when it is not.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// errors are the problems found when compiling spec.rego, with their
	// positions. Empty when the policy is Ready.
	// +optional
	// +listType=atomic
	Errors []PolicyError `json:"errors,omitempty"`

	// audit counts what the last periodic audit found of the workloads
	// the policy applies to; unset until a pass has judged it.
	// +optional
	Audit *AuditStatus `json:"audit,omitempty"`
}

// AuditStatus counts a policy's results over the workloads of the cluster
// in the last audit pass: each workload once, by its worst result.
type AuditStatus struct {
	// lastAuditTime is when that pass ended.
	LastAuditTime metav1.Time `json:"lastAuditTime"`
	// fail is how many workloads the policy denies (enforcementAction
	// deny).
	Fail int32 `json:"fail"`
	// warn is how many it warns about: warn rules, and denials of warn
	// and dryrun policies.
	Warn int32 `json:"warn"`
	// error is how many it failed to evaluate.
	Error int32 `json:"error"`
	// pass is how many it applied to and had nothing to say about.
	Pass int32 `json:"pass"`
	// skip is how many it denies but a WorkloadPolicyException in force
	// allows.
	// +optional
	Skip int32 `json:"skip,omitempty"`
}

// PolicyError is one problem in a policy's Rego module.
type PolicyError struct {
	// line is the 1-based line of spec.rego the problem is on, or 0 when
	// the problem has no position.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Line int32 `json:"line,omitempty"`

	// column is the 1-based column of the problem on its line, or 0 when
	// the problem has no position.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Column int32 `json:"column,omitempty"`

	// message describes the problem.
	// +required
	Message string `json:"message"`
}

// WorkloadPolicy is a Rego policy that modelgate's admission webhook
// evaluates against the workloads it sees (Pods, Deployments, StatefulSets,
// Jobs, CronJobs, AIInferences). Its deny rule rejects, warns or is only
// logged, as spec.enforcementAction says; its warn rule returns warnings.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,shortName=wlpol;wpol,categories=modelgate
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.enforcementAction`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Failing",type=integer,JSONPath=`.status.audit.fail`,description="Workloads the last audit found this policy denies"
// +kubebuilder:printcolumn:name="Excepted",type=integer,JSONPath=`.status.audit.skip`,description="Workloads the last audit found this policy denies but a WorkloadPolicyException allows",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkloadPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy: its Rego module, what it applies to and what its
	// messages do.
	// +required
	Spec WorkloadPolicySpec `json:"spec"`

	// status says whether the policy compiled and is enforced.
	// +optional
	Status WorkloadPolicyStatus `json:"status,omitzero"`
}

// WorkloadPolicyList is a list of WorkloadPolicy objects.
//
// +kubebuilder:object:root=true
type WorkloadPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the WorkloadPolicy objects.
	Items []WorkloadPolicy `json:"items"`
}
