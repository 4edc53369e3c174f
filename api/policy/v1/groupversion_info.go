/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

// Package v1 holds the policy.modelgate.io/v1 API: WorkloadPolicy, a Rego
// policy that the admission webhook evaluates against GPU and AI workloads,
// and WorkloadPolicyException, which lets named workloads break named
// policies until it expires.
//
// +kubebuilder:object:generate=true
// +groupName=policy.modelgate.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's objects.
	GroupVersion = schema.GroupVersion{Group: "policy.modelgate.io", Version: "v1"}

	// SchemeBuilder registers this package's types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the kinds of this group version, and the meta/v1
// types (ListOptions, DeleteOptions, ...) that clients send with them.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WorkloadPolicy{}, &WorkloadPolicyList{},
		&WorkloadPolicyException{}, &WorkloadPolicyExceptionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
