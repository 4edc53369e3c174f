/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExceptionState is what a WorkloadPolicyException's status says of it.
// +kubebuilder:validation:Enum=Active;Expired
type ExceptionState string

const (
	// ExceptionActive means the exception applies (expiresAt is ahead).
	ExceptionActive ExceptionState = "Active"
	// ExceptionExpired means expiresAt has passed; the exception applies
	// nowhere any more.
	ExceptionExpired ExceptionState = "Expired"
)

// PolicySource says where the policies a WorkloadPolicyException names
// come from. A policy is known by its source and its name: a WorkloadPolicy
// and a policy of the policy directory may share a name and are still two
// policies.
// +kubebuilder:validation:Enum=WorkloadPolicy;Directory
type PolicySource string

const (
	// PolicySourceWorkloadPolicy names the WorkloadPolicy resources (the
	// default).
	PolicySourceWorkloadPolicy PolicySource = "WorkloadPolicy"
	// PolicySourceDirectory names the .rego files of the policy directory
	// (the Configuration's policy.directory).
	PolicySourceDirectory PolicySource = "Directory"
)

// WorkloadPolicyExceptionSpec says which workloads of the exception's
// namespace may break which policies, why, and until when.
type WorkloadPolicyExceptionSpec struct {
	// policies are the names of the policies of policySource (the
	// WorkloadPolicies by default) whose denials the exception lifts. Each
	// must name a policy of that source in force; there is no wildcard.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Policies []string `json:"policies"`

	// policySource is where the policies named in policies come from:
	// WorkloadPolicy (the WorkloadPolicy resources) when unset, or
	// Directory (the .rego files of the Configuration's policy.directory).
	// The exception lifts the denials of those policies only, never those
	// of a policy of the same name from the other source.
	// +optional
	PolicySource PolicySource `json:"policySource,omitempty"`

	// match selects the workloads of the exception's namespace it covers.
	// Every field that is set must match; when it is empty the exception
	// covers every workload of its namespace.
	// +optional
	Match ExceptionMatch `json:"match,omitzero"`

	// expiresAt is when the exception stops applying: from then on, the
	// admission webhook, the audit and the CLI judge the workloads as if
	// it did not exist. It must be in the future, and at most the
	// Configuration's policy.exceptions.maxDuration ahead (default 90
	// days) when the exception is created or its expiresAt changed.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`

	// reason says why the workloads may break the policies; it is shown
	// with every warning the exception turns a denial into.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`

	// ticket is a reference to where the exception was approved
	// (OPS-123, a URL); shown with the warnings.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Ticket string `json:"ticket,omitempty"`
}

// ExceptionMatch selects workloads of the exception's namespace. A Pod
// made by a Deployment (through its ReplicaSet), a StatefulSet, a Job or a
// CronJob (through its Job) is also matched as that workload: by its kind
// and name, so that an exception for the Deployment covers the Pods it
// makes.
type ExceptionMatch struct {
	// kinds are the workload kinds covered; every kind the webhook judges
	// when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=Pod;Deployment;StatefulSet;Job;CronJob;AIInference;ResourceClaim;ResourceClaimTemplate
	Kinds []string `json:"kinds,omitempty"`

	// names are the names of the workloads covered, compared exactly;
	// every name when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names,omitempty"`

	// labelSelector selects the workloads covered by their labels, or by
	// the labels of their pod template; every workload when unset.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// WorkloadPolicyExceptionStatus is the observed state of an exception.
type WorkloadPolicyExceptionStatus struct {
	// state is Active until expiresAt, then Expired. It is written by
	// modelgate for people and tools to read; whether the exception
	// applies is decided from expiresAt at the time of each review, never
	// from this field.
	// +optional
	State ExceptionState `json:"state,omitempty"`

	// observedGeneration is the metadata.generation the state describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// WorkloadPolicyException lets the workloads of its namespace that it
// matches break the named WorkloadPolicies until expiresAt: a denial it
// covers is admitted with a warning that names the exception, its ticket
// and its expiry, and the audit reports it as skip. Creating one is a
// separate permission (ClusterRole modelgate-exception-author).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced,shortName=wpolex,categories=modelgate
// +kubebuilder:printcolumn:name="Policies",type=string,JSONPath=`.spec.policies`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Ticket",type=string,JSONPath=`.spec.ticket`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WorkloadPolicyException struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which workloads may break which policies, why and until
	// when.
	// +required
	Spec WorkloadPolicyExceptionSpec `json:"spec"`

	// status says whether the exception is still in force.
	// +optional
	Status WorkloadPolicyExceptionStatus `json:"status,omitzero"`
}

// WorkloadPolicyExceptionList is a list of WorkloadPolicyException objects.
//
// +kubebuilder:object:root=true
type WorkloadPolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the WorkloadPolicyException objects.
	Items []WorkloadPolicyException `json:"items"`
}
