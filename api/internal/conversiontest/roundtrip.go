/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package conversiontest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"

	"github.com/modelgate/modelgate/api/internal/convdata"
	v1 "github.com/modelgate/modelgate/api/v1"
)

// Iterations is how many random objects a fuzz test converts.
const Iterations = 5000

// SeedEnv names the variable that, set to an integer, replaces the first seed of every fuzz run
// (0 otherwise): object i of a run is filled with seed+i, and a failure
// names its seed, so SeedEnv=<that seed> makes it the run's first object.
const SeedEnv = "MODELGATE_CONVERSION_SEED"

// Object is a spoke AIInference: *T, convertible to and from the hub.
type Object[T any] interface {
	*T
	conversion.Convertible
	metav1.Object
}

// Case is one fuzzed object as a coverage predicate sees it.
type Case struct {
	// Hub is the object's v1 form.
	Hub *v1.AIInference
	// Annotated reports that the spoke read from Hub carries the
	// conversion annotation.
	Annotated bool
}

// Coverage names the kinds of object a fuzz run must produce at least
// once, so that a change to the fill funcs cannot quietly stop testing them.
type Coverage map[string]func(Case) bool

// Diff is cmp.Diff, nil and empty alike, as equality.Semantic sees them.
func Diff(want, got any) string {
	return cmp.Diff(want, got, cmpopts.EquateEmpty())
}

// HasAnnotation reports whether obj carries the conversion annotation.
func HasAnnotation(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[convdata.Annotation]
	return ok
}

// FuzzSpokeHubSpoke converts Iterations random spokes to the hub and back,
// directly and through JSON, and fails unless each comes back equal with no
// annotation (see SpokeRoundTrip).
func FuzzSpokeHubSpoke[T any, P Object[T]](t *testing.T, cov Coverage, funcs ...any) {
	t.Helper()
	fuzz(t, cov, funcs, func(f *randfill.Filler) (Case, error) {
		var spoke T
		f.Fill(&spoke)
		var hub *v1.AIInference
		for _, viaJSON := range []bool{false, true} {
			h, err := SpokeRoundTrip[T](P(&spoke), viaJSON)
			if err != nil {
				return Case{}, fmt.Errorf("via JSON %t: %w", viaJSON, err)
			}
			hub = h
		}
		return Case{Hub: hub}, nil
	})
}

// FuzzHubSpokeHub converts Iterations random hubs to the spoke and back,
// directly and through JSON, and fails unless each comes back equal (see
// HubRoundTrip).
func FuzzHubSpokeHub[T any, P Object[T]](t *testing.T, cov Coverage, funcs ...any) {
	t.Helper()
	fuzz(t, cov, funcs, func(f *randfill.Filler) (Case, error) {
		var hub v1.AIInference
		f.Fill(&hub)
		var annotated bool
		for _, viaJSON := range []bool{false, true} {
			a, err := HubRoundTrip[T, P](&hub, viaJSON)
			if err != nil {
				return Case{}, fmt.Errorf("via JSON %t: %w", viaJSON, err)
			}
			annotated = a
		}
		return Case{Hub: &hub, Annotated: annotated}, nil
	})
}

func fuzz(t *testing.T, cov Coverage, funcs []any, one func(*randfill.Filler) (Case, error)) {
	t.Helper()
	var first int64
	if s := os.Getenv(SeedEnv); s != "" {
		var err error
		if first, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
	}
	hits := make(map[string]int, len(cov))
	for i := range int64(Iterations) {
		seed := first + i
		c, err := one(NewFiller(seed, funcs...))
		if err != nil {
			t.Fatalf("seed %d (rerun with %s=%d): %v", seed, SeedEnv, seed, err)
		}
		for name, covered := range cov {
			if covered(c) {
				hits[name]++
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cov)) {
		if hits[name] == 0 {
			t.Errorf("no object of the %d was %q: the fill funcs no longer reach it", Iterations, name)
		}
	}
}

// SpokeRoundTrip converts start, which must not carry the conversion
// annotation, to the hub and back, through JSON first at each step when
// viaJSON (as the API server does). It checks that neither conversion
// changes its source, that the hub and the result carry no annotation, and
// that the result is equal to start. It returns the hub.
func SpokeRoundTrip[T any, P Object[T]](start P, viaJSON bool) (*v1.AIInference, error) {
	if HasAnnotation(start) {
		return nil, errors.New("the starting spoke carries the conversion annotation")
	}
	src := start
	if viaJSON {
		src = P(new(T))
		if err := jsonCopy(start, src); err != nil {
			return nil, err
		}
	}
	hub := &v1.AIInference{}
	if err := convertTo(src, hub); err != nil {
		return nil, err
	}
	if HasAnnotation(hub) {
		return nil, fmt.Errorf("the hub carries the conversion annotation %s", hub.Annotations[convdata.Annotation])
	}
	if viaJSON {
		h := &v1.AIInference{}
		if err := jsonCopy(hub, h); err != nil {
			return nil, err
		}
		hub = h
	}
	back := P(new(T))
	if err := convertFrom(hub, back); err != nil {
		return nil, err
	}
	if HasAnnotation(back) {
		return nil, fmt.Errorf("spoke -> hub -> spoke added the conversion annotation %s", back.GetAnnotations()[convdata.Annotation])
	}
	if viaJSON {
		b := P(new(T))
		if err := jsonCopy(back, b); err != nil {
			return nil, err
		}
		back = b
	}
	if !equality.Semantic.DeepEqual(start, back) {
		return nil, fmt.Errorf("spoke -> hub -> spoke changed the object (-want +got):\n%s", Diff(start, back))
	}
	return hub, nil
}

// HubRoundTrip converts start, which must not carry the conversion
// annotation, to the spoke and back, through JSON first at each step when
// viaJSON (as the API server does). It checks that neither conversion
// changes its source, that the result carries no annotation and is equal
// to start, and that the spoke carries the annotation exactly when its own
// fields cannot say all of start's spec. It reports whether it did.
func HubRoundTrip[T any, P Object[T]](start *v1.AIInference, viaJSON bool) (annotated bool, err error) {
	if HasAnnotation(start) {
		return false, errors.New("the starting hub carries the conversion annotation")
	}
	hub := start
	if viaJSON {
		hub = &v1.AIInference{}
		if err := jsonCopy(start, hub); err != nil {
			return false, err
		}
	}
	spoke := P(new(T))
	if err := convertFrom(hub, spoke); err != nil {
		return false, err
	}
	annotated = HasAnnotation(spoke)
	if viaJSON {
		s := P(new(T))
		if err := jsonCopy(spoke, s); err != nil {
			return false, err
		}
		spoke = s
	}
	bare := spoke.DeepCopyObject().(P)
	back := &v1.AIInference{}
	if err := convertTo(spoke, back); err != nil {
		return false, err
	}
	if HasAnnotation(back) {
		return false, fmt.Errorf("the hub carries the conversion annotation %s", back.Annotations[convdata.Annotation])
	}
	if viaJSON {
		b := &v1.AIInference{}
		if err := jsonCopy(back, b); err != nil {
			return false, err
		}
		back = b
	}
	if !equality.Semantic.DeepEqual(start, back) {
		return false, fmt.Errorf("hub -> spoke -> hub changed the object (-want +got):\n%s", Diff(start, back))
	}

	// Without the annotation the spoke must say less than start, or it was
	// not needed.
	a := bare.GetAnnotations()
	delete(a, convdata.Annotation)
	bare.SetAnnotations(a)
	plain := &v1.AIInference{}
	if err := convertTo(bare, plain); err != nil {
		return false, err
	}
	if needed := !equality.Semantic.DeepEqual(start.Spec, plain.Spec); needed != annotated {
		return false, fmt.Errorf("the spoke carries the conversion annotation: %t, but it is needed: %t; spec without it (-want +got):\n%s",
			annotated, needed, Diff(start.Spec, plain.Spec))
	}
	return annotated, nil
}

// ConvertTo converts src to the hub and fails if that changes src.
func ConvertTo[T any, P Object[T]](src P) (*v1.AIInference, error) {
	dst := &v1.AIInference{}
	return dst, convertTo(src, dst)
}

// ConvertFrom converts src to the spoke and fails if that changes src.
func ConvertFrom[T any, P Object[T]](src *v1.AIInference) (P, error) {
	dst := P(new(T))
	return dst, convertFrom(src, dst)
}

func convertTo[T any, P Object[T]](src P, dst *v1.AIInference) error {
	before := src.DeepCopyObject()
	if err := src.ConvertTo(dst); err != nil {
		return fmt.Errorf("ConvertTo: %w", err)
	}
	if !reflect.DeepEqual(before, src) {
		return fmt.Errorf("ConvertTo changed its source (-before +after):\n%s", cmp.Diff(before, src))
	}
	return nil
}

func convertFrom[T any, P Object[T]](src *v1.AIInference, dst P) error {
	before := src.DeepCopy()
	if err := dst.ConvertFrom(src); err != nil {
		return fmt.Errorf("ConvertFrom: %w", err)
	}
	if !reflect.DeepEqual(before, src) {
		return fmt.Errorf("ConvertFrom changed its source (-before +after):\n%s", cmp.Diff(before, src))
	}
	return nil
}

// jsonCopy sets out to in marshaled to JSON and back.
func jsonCopy(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", in, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("unmarshal %T %s: %w", out, b, err)
	}
	return nil
}

// StoredSpec decodes the hub spec obj's conversion annotation holds.
func StoredSpec(obj metav1.Object) (v1.AIInferenceSpec, error) {
	raw, ok := obj.GetAnnotations()[convdata.Annotation]
	if !ok {
		return v1.AIInferenceSpec{}, errors.New("no conversion annotation")
	}
	var spec v1.AIInferenceSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return v1.AIInferenceSpec{}, fmt.Errorf("conversion annotation %s: %w", raw, err)
	}
	return spec, nil
}
