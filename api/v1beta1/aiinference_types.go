/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EngineName is the inference engine that serves the model.
// +kubebuilder:validation:Enum=vllm;sglang;tgi;triton;custom
type EngineName string

// The engines. Every engine but custom has a port and health path preset.
const (
	EngineVLLM   EngineName = "vllm"
	EngineSGLang EngineName = "sglang"
	EngineTGI    EngineName = "tgi"
	EngineTriton EngineName = "triton"
	// EngineCustom is any other engine: image and port are required.
	EngineCustom EngineName = "custom"
)

// CacheMedium is where replicas keep the fetched model.
// +kubebuilder:validation:Enum=disk;memory
type CacheMedium string

// The cache media.
const (
	// CacheDisk is an emptyDir on the node's disk (the default).
	CacheDisk CacheMedium = "disk"
	// CacheMemory is an emptyDir in RAM (tmpfs), counted against memory.
	CacheMemory CacheMedium = "memory"
)

// AIInferenceSpec is the desired state of an AIInference.
// +kubebuilder:validation:XValidation:rule="!self.model.uri.startsWith('pvc://') || !has(self.model.cache)",message="model.cache does not apply to a pvc:// model, which is mounted directly",fieldPath=".model.cache"
type AIInferenceSpec struct {
	// model is what to serve and where to fetch it from.
	// +required
	Model ModelSpec `json:"model"`

	// engine is the inference engine and how to run it. The defaulter sets
	// name (vllm) and port (the engine's preset).
	// +optional
	Engine EngineSpec `json:"engine,omitzero"`

	// gpu is the GPUs each replica needs; omit it for CPU-only serving.
	// +optional
	GPU *GPUSpec `json:"gpu,omitempty"`

	// replicas is the number of serving replicas; the defaulter sets 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	Replicas *int32 `json:"replicas,omitempty"`

	// warmup bounds the time a replica may take to fetch and load the
	// model before it must be ready; the defaulter sets 300 seconds.
	// +optional
	Warmup *WarmupSpec `json:"warmup,omitempty"`
}

// ModelSpec is the model to serve.
// +kubebuilder:validation:XValidation:rule="!has(self.revision) || (self.uri.startsWith('hf://') && !self.uri.contains('@'))",message="revision is only for an hf:// uri without @revision",fieldPath=".revision"
type ModelSpec struct {
	// uri is where the model is: s3://bucket[/path], gs://bucket[/path],
	// hf://org/repo, pvc://claim[/path], https://host/path or
	// oci://registry/repo(:tag|@sha256:digest). Credentials never go in the
	// URI: see credentialsSecretRef.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URI string `json:"uri"`

	// revision is the Hugging Face branch, tag or commit of an hf:// model;
	// a 40-digit commit pins it.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Revision string `json:"revision,omitempty"`

	// cache is where replicas keep the fetched model; disk by default.
	// +optional
	Cache *CacheSpec `json:"cache,omitempty"`

	// credentialsSecretRef names the Secret, in the AIInference's namespace,
	// holding the credentials used to fetch the model.
	// +optional
	CredentialsSecretRef *SecretReference `json:"credentialsSecretRef,omitempty"`
}

// CacheSpec is where replicas keep the fetched model.
type CacheSpec struct {
	// medium is disk (an emptyDir) or memory (a tmpfs emptyDir).
	// +required
	Medium CacheMedium `json:"medium"`

	// sizeLimit bounds the cache.
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// SecretReference names a Secret in the object's namespace.
type SecretReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EngineSpec is the inference engine and how to run it.
// +kubebuilder:validation:XValidation:rule="!has(self.name) || self.name != 'custom' || (has(self.image) && has(self.port))",message="image and port are required when name is custom"
type EngineSpec struct {
	// name is the engine: vllm, sglang, tgi, triton or custom. Its preset
	// gives the port and health path unless they are set.
	// +optional
	Name EngineName `json:"name,omitempty"`

	// image is the serving container image; required for custom, else
	// left to the platform's choice for the engine when unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// port is the engine's HTTP port, for probes and the Service.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// args are extra arguments for the engine.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Args []string `json:"args,omitempty"`
}

// GPUSpec is the GPUs each replica needs.
type GPUSpec struct {
	// products are the acceptable GPU products (the node label value, for
	// example NVIDIA-A100-SXM4-80GB): a replica runs on a node with any of
	// them; any GPU when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Products []string `json:"products,omitempty"`

	// count is the GPUs per replica; the defaulter sets 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Count int32 `json:"count,omitempty"`

	// minMemoryMiB is the least memory each GPU must have, in MiB.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1048576
	MinMemoryMiB int32 `json:"minMemoryMiB,omitempty"`
}

// WarmupSpec bounds a replica's start.
type WarmupSpec struct {
	// timeoutSeconds is how long a replica may take to fetch and load the
	// model: the startup probe's budget.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
}

// AIInference is a model served on GPUs by an inference engine.
//
// v1beta1 is served and converted to and from v1, the storage version.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=aii,categories=modelgate
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=".spec.model.uri"
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
