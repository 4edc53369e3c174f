/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

// Package install registers every modelgate API group and version with a
// runtime.Scheme: WorkloadPolicy (policy.modelgate.io/v1) and AIInference
// in all its served versions (serving.modelgate.io/v1, v1beta1, v1alpha1),
// so that conversion between them has every version to work with.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	servingv1alpha1 "github.com/modelgate/modelgate/api/v1alpha1"
	servingv1beta1 "github.com/modelgate/modelgate/api/v1beta1"
)

var builder = runtime.NewSchemeBuilder(
	policyv1.AddToScheme,
	servingv1.AddToScheme,
	servingv1beta1.AddToScheme,
	servingv1alpha1.AddToScheme,
)

// AddToScheme adds every modelgate API version to a scheme.
var AddToScheme = builder.AddToScheme
