/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1beta1

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/modelgate/modelgate/api/internal/conversiontest"
	v1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/api/v1alpha1"
)

// TestFuzzSpokeToSpoke covers the last version pair, v1alpha1 and
// v1beta1, which the API server converts through the hub (controller-
// runtime's convertViaHub): from a random v1 object, reading it as one
// spoke, converting that to the other spoke and back loses nothing, and
// the hub at the end of the chain is the one at the start.
func TestFuzzSpokeToSpoke(t *testing.T) {
	for i := range conversiontest.Iterations {
		seed := int64(i)
		hub := &v1.AIInference{}
		conversiontest.NewFiller(seed).Fill(hub)
		hub.Annotations = conversiontest.UserAnnotations(hub)

		alpha, err := conversiontest.ConvertFrom[v1alpha1.AIInference](hub)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// v1alpha1 -> v1beta1 -> v1alpha1, each step through the hub.
		beta, err := conversiontest.ConvertFrom[AIInference](mustUp(t, seed, alpha))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		alpha2, err := conversiontest.ConvertFrom[v1alpha1.AIInference](mustUp(t, seed, beta))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(alpha, alpha2) {
			t.Fatalf("seed %d: v1alpha1 -> v1beta1 -> v1alpha1 changed it (-want +got):\n%s", seed, conversiontest.Diff(alpha, alpha2))
		}
		if end := mustUp(t, seed, alpha2); !equality.Semantic.DeepEqual(hub, end) {
			t.Fatalf("seed %d: v1 -> v1alpha1 -> v1beta1 -> v1alpha1 -> v1 changed it (-want +got):\n%s", seed, conversiontest.Diff(hub, end))
		}
		// v1beta1 -> v1alpha1 -> v1beta1.
		beta2, err := conversiontest.ConvertFrom[AIInference](mustUp(t, seed, alpha2))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !equality.Semantic.DeepEqual(beta, beta2) {
			t.Fatalf("seed %d: v1beta1 -> v1alpha1 -> v1beta1 changed it (-want +got):\n%s", seed, conversiontest.Diff(beta, beta2))
		}
	}
}

// mustUp converts a spoke to the hub.
func mustUp[T any, P conversiontest.Object[T]](t *testing.T, seed int64, spoke P) *v1.AIInference {
	t.Helper()
	hub, err := conversiontest.ConvertTo[T](spoke)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if conversiontest.HasAnnotation(hub) {
		t.Fatalf("seed %d: the hub carries the conversion annotation", seed)
	}
	return hub
}
