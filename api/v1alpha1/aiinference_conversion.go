/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/api/internal/convdata"
	v1 "github.com/modelgate/modelgate/api/v1"
)

var _ conversion.Convertible = (*AIInference)(nil)

// ConvertTo converts this AIInference to the hub version (v1). Fields v1
// has and v1alpha1 does not (a second GPU product, minMemoryMiB, the model
// cache and credentials, resources, scheduling, ...) come back from the
// conversion annotation, unless the v1alpha1 field they hang off was
// changed since: then the v1alpha1 value wins (a new productLabel is the
// only product; a new engine keeps only the environment).
func (src *AIInference) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*v1.AIInference)
	dst.ObjectMeta = src.ObjectMeta
	spec := specUp(&src.Spec)
	var stored v1.AIInferenceSpec
	if convdata.Take(&dst.ObjectMeta, &stored) {
		spec = restore(&stored, &src.Spec, spec)
	}
	dst.Spec = spec
	dst.Status = statusUp(&src.Status)
	return nil
}

// ConvertFrom converts from the hub version (v1) to this version. When
// v1alpha1 cannot say all of the v1 spec, the whole v1 spec goes in the
// conversion annotation.
func (dst *AIInference) ConvertFrom(srcRaw conversion.Hub) error {
	src := srcRaw.(*v1.AIInference)
	dst.ObjectMeta = src.ObjectMeta
	var ignored v1.AIInferenceSpec
	convdata.Take(&dst.ObjectMeta, &ignored)
	dst.Spec = specDown(&src.Spec)
	dst.Status = statusDown(&src.Status)
	if up := specUp(&dst.Spec); !equality.Semantic.DeepEqual(up, src.Spec) {
		return convdata.Store(&dst.ObjectMeta, &src.Spec)
	}
	return nil
}

// specUp is the v1 spec that says what s says, and nothing more. A valid
// hf:// modelSource with @revision splits into model.uri and
// model.revision; anything else, valid or not, is kept verbatim for
// validation to judge.
func specUp(s *AIInferenceSpec) v1.AIInferenceSpec {
	out := v1.AIInferenceSpec{
		Model:    v1.ModelSpec{URI: s.ModelSource},
		Engine:   v1.EngineSpec{Name: v1.EngineName(s.Engine)},
		Replicas: copyInt32(s.Replicas),
	}
	if u, err := annotations.ParseModelURI(s.ModelSource); err == nil && u.Scheme == annotations.SchemeHF && u.Revision != "" {
		out.Model.URI = strings.TrimSuffix(s.ModelSource, "@"+u.Revision)
		out.Model.Revision = u.Revision
	}
	if s.GPU != nil {
		out.GPU = &v1.GPUSpec{Count: s.GPU.Count}
		if s.GPU.ProductLabel != "" {
			out.GPU.Products = []string{s.GPU.ProductLabel}
		}
	}
	if s.WarmupTimeoutSeconds != nil {
		out.Warmup = &v1.WarmupSpec{TimeoutSeconds: *s.WarmupTimeoutSeconds}
	}
	return out
}

// specDown is the v1alpha1 spec closest to s: the first GPU product, the
// revision joined back into the URI, the engine name as it is.
func specDown(s *v1.AIInferenceSpec) AIInferenceSpec {
	out := AIInferenceSpec{
		ModelSource: s.Model.URI,
		Engine:      Engine(s.Engine.Name),
		Replicas:    copyInt32(s.Replicas),
	}
	if s.Model.Revision != "" {
		out.ModelSource += "@" + s.Model.Revision
	}
	if s.GPU != nil {
		out.GPU = &GPU{Count: s.GPU.Count}
		if len(s.GPU.Products) > 0 {
			out.GPU.ProductLabel = s.GPU.Products[0]
		}
	}
	if s.Warmup != nil {
		out.WarmupTimeoutSeconds = copyInt32(&s.Warmup.TimeoutSeconds)
	}
	return out
}

// restore merges the v1 spec kept in the annotation (stored) with the
// v1alpha1 spec s: each v1alpha1 field still equal to what stored reads as
// in v1alpha1 keeps stored's richer value; a changed one takes up's (the v1
// form of s).
func restore(stored *v1.AIInferenceSpec, s *AIInferenceSpec, up v1.AIInferenceSpec) v1.AIInferenceSpec {
	was := specDown(stored)
	out := *stored.DeepCopy()
	if was.ModelSource != s.ModelSource {
		out.Model.URI, out.Model.Revision = up.Model.URI, up.Model.Revision
	}
	if was.Engine != s.Engine {
		// A new engine: the old one's image, port, health path and args
		// would be wrong for it (the defaulter sets the new preset port);
		// its environment is the workload's and stays.
		out.Engine = v1.EngineSpec{Name: up.Engine.Name, Env: out.Engine.Env}
	}
	switch {
	case s.GPU == nil || was.GPU == nil:
		if (s.GPU == nil) != (was.GPU == nil) {
			out.GPU = up.GPU
		}
	default:
		if was.GPU.ProductLabel != s.GPU.ProductLabel {
			out.GPU.Products = up.GPU.Products
		}
		out.GPU.Count = s.GPU.Count
	}
	if !equality.Semantic.DeepEqual(was.Replicas, s.Replicas) {
		out.Replicas = up.Replicas
	}
	if !equality.Semantic.DeepEqual(was.WarmupTimeoutSeconds, s.WarmupTimeoutSeconds) {
		out.Warmup = up.Warmup
	}
	return out
}

// statusUp and statusDown copy the status, the same in every version.
func statusUp(s *AIInferenceStatus) v1.AIInferenceStatus {
	c := s.DeepCopy()
	return v1.AIInferenceStatus{
		ObservedGeneration: c.ObservedGeneration,
		Phase:              v1.Phase(c.Phase),
		ReadyReplicas:      c.ReadyReplicas,
		Replicas:           c.Replicas,
		Selector:           c.Selector,
		ModelLoaded:        c.ModelLoaded,
		LastTransitionTime: c.LastTransitionTime,
		Conditions:         c.Conditions,
	}
}

func statusDown(s *v1.AIInferenceStatus) AIInferenceStatus {
	c := s.DeepCopy()
	return AIInferenceStatus{
		ObservedGeneration: c.ObservedGeneration,
		Phase:              Phase(c.Phase),
		ReadyReplicas:      c.ReadyReplicas,
		Replicas:           c.Replicas,
		Selector:           c.Selector,
		ModelLoaded:        c.ModelLoaded,
		LastTransitionTime: c.LastTransitionTime,
		Conditions:         c.Conditions,
	}
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
