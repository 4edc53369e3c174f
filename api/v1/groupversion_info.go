/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

// Package v1 holds the serving.modelgate.io/v1 API: AIInference, a model
// served on GPUs by an inference engine.
//
// +kubebuilder:object:generate=true
// +groupName=serving.modelgate.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's objects.
	GroupVersion = schema.GroupVersion{Group: "serving.modelgate.io", Version: "v1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this group version, and the meta/v1
// types (ListOptions, DeleteOptions, ...) that clients send with them.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &AIInference{}, &AIInferenceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
