/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

// Package convdata keeps, in an annotation of an older-version object, the
// hub's fields that the older version has no place for, so that a
// round trip through the older version loses nothing.
//
// A spoke object carries the annotation only when its own fields cannot
// say everything the hub object says; the hub object never carries it.
package convdata

import (
	"encoding/json"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/modelgate/modelgate/api/v1"
)

// Annotation holds the hub object's spec, as JSON, on an older-version
// object.
const Annotation = v1.ConversionDataAnnotation

// Store sets the annotation on obj to v as JSON. It copies the annotation
// map rather than changing one obj may share with another object.
func Store(obj *metav1.ObjectMeta, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	a := make(map[string]string, len(obj.Annotations)+1)
	maps.Copy(a, obj.Annotations)
	a[Annotation] = string(b)
	obj.Annotations = a
	return nil
}

// Take removes the annotation from obj and decodes it into v. It reports
// whether there was an annotation that decoded; an annotation that does not
// (edited by hand) is dropped and ignored, since failing the conversion
// would make the object unreadable. Like Store, it never changes a map obj
// may share.
func Take(obj *metav1.ObjectMeta, v any) bool {
	raw, ok := obj.Annotations[Annotation]
	if !ok {
		return false
	}
	a := maps.Clone(obj.Annotations)
	delete(a, Annotation)
	if len(a) == 0 {
		a = nil
	}
	obj.Annotations = a
	return json.Unmarshal([]byte(raw), v) == nil
}
