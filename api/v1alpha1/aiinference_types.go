/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine is the inference engine that serves the model. v1 knows more
// engines (sglang, custom); an object using one reads here with that name
// as it is, which the API server's validation ratcheting accepts on update
// while it is unchanged.
// +kubebuilder:validation:Enum=vllm;triton;tgi
type Engine string

// The engines v1alpha1 knows.
const (
	EngineVLLM   Engine = "vllm"
	EngineTriton Engine = "triton"
	EngineTGI    Engine = "tgi"
)

// AIInferenceSpec is the desired state of an AIInference.
type AIInferenceSpec struct {
	// modelSource is the model URI: s3://, gs://, hf://org/repo[@revision],
	// pvc://, https:// or oci://.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	ModelSource string `json:"modelSource"`

	// engine is vllm, triton or tgi; the defaulter sets vllm.
	// +optional
	Engine Engine `json:"engine,omitempty"`

	// gpu is the GPUs each replica needs.
	// +optional
	GPU *GPU `json:"gpu,omitempty"`

	// replicas is the number of serving replicas; the defaulter sets 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	Replicas *int32 `json:"replicas,omitempty"`

	// warmupTimeoutSeconds is how long a replica may take to fetch and
	// load the model; the defaulter sets 300.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	WarmupTimeoutSeconds *int32 `json:"warmupTimeoutSeconds,omitempty"`
}

// GPU is the GPUs each replica needs.
type GPU struct {
	// productLabel is the one acceptable GPU product (the node label
	// value); any when empty.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ProductLabel string `json:"productLabel,omitempty"`

	// count is the GPUs per replica; the defaulter sets 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Count int32 `json:"count,omitempty"`
}

// AIInference is a model served on GPUs by an inference engine.
//
// v1alpha1 is deprecated: it is served and converted to and from v1, the
// storage version. Move manifests to serving.modelgate.io/v1.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:deprecatedversion:warning="serving.modelgate.io/v1alpha1 AIInference is deprecated; use serving.modelgate.io/v1 (see docs/api/aiinference.md)"
// +kubebuilder:resource:shortName=aii,categories=modelgate
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=".spec.modelSource"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type AIInference struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec AIInferenceSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status AIInferenceStatus `json:"status,omitzero"`
}

// AIInferenceList is a list of AIInference.
//
// +kubebuilder:object:root=true
type AIInferenceList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the AIInferences.
	Items []AIInference `json:"items"`
}
