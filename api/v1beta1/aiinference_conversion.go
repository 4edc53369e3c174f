/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1beta1

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	"github.com/modelgate/modelgate/api/internal/convdata"
	v1 "github.com/modelgate/modelgate/api/v1"
)

var _ conversion.Convertible = (*AIInference)(nil)

// ConvertTo converts this AIInference to the hub version (v1). The fields
// only v1 has (spec.resources, spec.scheduling, engine.env,
// engine.healthPath, model.cache.claimName) come back from the conversion
// annotation; engine.healthPath only while engine.name is unchanged and
// claimName only while model.cache is, since they belong to those.
func (src *AIInference) ConvertTo(dstRaw conversion.Hub) error {
	dst := dstRaw.(*v1.AIInference)
	dst.ObjectMeta = src.ObjectMeta
	spec := specUp(&src.Spec)
	var stored v1.AIInferenceSpec
	if convdata.Take(&dst.ObjectMeta, &stored) {
		restore(&stored, &src.Spec, &spec)
	}
	dst.Spec = spec
	dst.Status = statusUp(&src.Status)
	return nil
}

// ConvertFrom converts from the hub version (v1) to this version. When
// v1beta1 cannot say all of the v1 spec, the whole v1 spec goes in the
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

// specUp is the v1 spec that says what s says: v1beta1's fields all have
// the same place in v1.
func specUp(s *AIInferenceSpec) v1.AIInferenceSpec {
	c := s.DeepCopy()
	out := v1.AIInferenceSpec{
		Model: v1.ModelSpec{URI: c.Model.URI, Revision: c.Model.Revision},
		Engine: v1.EngineSpec{
			Name:  v1.EngineName(c.Engine.Name),
			Image: c.Engine.Image,
			Port:  c.Engine.Port,
			Args:  c.Engine.Args,
		},
		Replicas: c.Replicas,
	}
	if m := c.Model.Cache; m != nil {
		out.Model.Cache = &v1.CacheSpec{Medium: v1.CacheMedium(m.Medium), SizeLimit: m.SizeLimit}
	}
	if r := c.Model.CredentialsSecretRef; r != nil {
		out.Model.CredentialsSecretRef = &v1.SecretReference{Name: r.Name}
	}
	if g := c.GPU; g != nil {
		out.GPU = &v1.GPUSpec{Products: g.Products, Count: g.Count, MinMemoryMiB: g.MinMemoryMiB}
	}
	if w := c.Warmup; w != nil {
		out.Warmup = &v1.WarmupSpec{TimeoutSeconds: w.TimeoutSeconds}
	}
	return out
}

// specDown is s without what only v1 has. A pvc cache reads as medium pvc
// here (an unchanged field passes v1beta1's validation by ratcheting); its
// claim is in the annotation.
func specDown(s *v1.AIInferenceSpec) AIInferenceSpec {
	c := s.DeepCopy()
	out := AIInferenceSpec{
		Model: ModelSpec{URI: c.Model.URI, Revision: c.Model.Revision},
		Engine: EngineSpec{
			Name:  EngineName(c.Engine.Name),
			Image: c.Engine.Image,
			Port:  c.Engine.Port,
			Args:  c.Engine.Args,
		},
		Replicas: c.Replicas,
	}
	if m := c.Model.Cache; m != nil {
		out.Model.Cache = &CacheSpec{Medium: CacheMedium(m.Medium), SizeLimit: m.SizeLimit}
	}
	if r := c.Model.CredentialsSecretRef; r != nil {
		out.Model.CredentialsSecretRef = &SecretReference{Name: r.Name}
	}
	if g := c.GPU; g != nil {
		out.GPU = &GPUSpec{Products: g.Products, Count: g.Count, MinMemoryMiB: g.MinMemoryMiB}
	}
	if w := c.Warmup; w != nil {
		out.Warmup = &WarmupSpec{TimeoutSeconds: w.TimeoutSeconds}
	}
	return out
}

// restore puts back into up (the v1 form of s) the v1-only fields of
// stored, the v1 spec kept in the annotation.
func restore(stored *v1.AIInferenceSpec, s *AIInferenceSpec, up *v1.AIInferenceSpec) {
	st := stored.DeepCopy()
	was := specDown(st)
	up.Resources = st.Resources
	up.Scheduling = st.Scheduling
	up.Engine.Env = st.Engine.Env
	if was.Engine.Name == s.Engine.Name {
		up.Engine.HealthPath = st.Engine.HealthPath
	}
	if equality.Semantic.DeepEqual(was.Model.Cache, s.Model.Cache) {
		up.Model.Cache = st.Model.Cache
	}
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
