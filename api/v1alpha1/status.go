/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Phase is where an AIInference is in its life.
// +kubebuilder:validation:Enum=Pending;Loading;Ready;Failed
type Phase string

// The phases of an AIInference.
const (
	// PhasePending: accepted, nothing scheduled yet.
	PhasePending Phase = "Pending"
	// PhaseLoading: replicas are fetching the model or warming up.
	PhaseLoading Phase = "Loading"
	// PhaseReady: at least one replica serves.
	PhaseReady Phase = "Ready"
	// PhaseFailed: the model cannot be loaded or served; conditions say why.
	PhaseFailed Phase = "Failed"
)

// AIInferenceStatus is the observed state of an AIInference. It is the same
// in every version, so conversion copies it unchanged.
type AIInferenceStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarizes the conditions: Pending, Loading, Ready or Failed.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// readyReplicas is the number of replicas serving the model.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// replicas is the number of Pods of the AIInference's Deployment: the
	// scale subresource's status replicas (kubectl scale, an HPA, KEDA).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas,omitempty"`

	// selector is the label selector of those Pods, in its string form:
	// the scale subresource's selector, which an HPA reads to find the
	// Pods' metrics.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Selector string `json:"selector,omitempty"`

	// modelLoaded reports that the model has been fetched and loaded.
	// +optional
	ModelLoaded bool `json:"modelLoaded,omitempty"`

	// lastTransitionTime is when phase last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`

	// conditions are the detailed observations, keyed by type.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
