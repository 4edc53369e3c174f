/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package conversiontest

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/internal/convdata"
	v1 "github.com/modelgate/modelgate/api/v1"
)

// EdgeHubs are v1 objects at the edges of the schema (and past them: the
// conversion must keep what validation would reject) that every spoke
// must round-trip, keyed by a name for the test case.
func EdgeHubs() map[string]*v1.AIInference {
	uri := v1.ModelSpec{URI: "s3://models/llama"}
	return map[string]*v1.AIInference{
		"empty object": {},
		"no gpu, warmup, replicas, resources or scheduling": {
			Spec: v1.AIInferenceSpec{Model: uri, Engine: v1.EngineSpec{Name: v1.EngineVLLM}},
		},
		"empty lists and maps": {
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}, Finalizers: []string{}},
			Spec: v1.AIInferenceSpec{
				Model:      uri,
				Engine:     v1.EngineSpec{Args: []string{}, Env: []corev1.EnvVar{}},
				GPU:        &v1.GPUSpec{Products: []string{}},
				Resources:  &corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}},
				Scheduling: &v1.SchedulingSpec{NodeSelector: map[string]string{}, Tolerations: []corev1.Toleration{}},
			},
			Status: v1.AIInferenceStatus{Conditions: []metav1.Condition{}},
		},
		"empty structs behind pointers": {
			Spec: v1.AIInferenceSpec{
				Model: v1.ModelSpec{URI: "s3://models/llama", Cache: &v1.CacheSpec{}, CredentialsSecretRef: &v1.SecretReference{}},
				GPU:   &v1.GPUSpec{}, Replicas: new(int32), Warmup: &v1.WarmupSpec{},
				Resources: &corev1.ResourceRequirements{}, Scheduling: &v1.SchedulingSpec{},
			},
		},
		"maximum values": {
			Spec: v1.AIInferenceSpec{
				Model:    v1.ModelSpec{URI: "hf://org/repo", Revision: "0123456789abcdef0123456789abcdef01234567"},
				Engine:   v1.EngineSpec{Name: v1.EngineCustom, Image: "registry.example.com/engine:v1", Port: 65535},
				GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-H100-80GB-HBM3"}, Count: 64, MinMemoryMiB: 1048576},
				Replicas: ptrTo[int32](1024),
				Warmup:   &v1.WarmupSpec{TimeoutSeconds: 86400},
			},
		},
		"unicode metadata": {
			ObjectMeta: metav1.ObjectMeta{
				Name: "модель-模型-🦙", Labels: map[string]string{"app": "llama"},
				Annotations: map[string]string{"example.com/note": "ünïcödé 🦙 注释", "example.com/json": `{"a":"b"}`},
			},
			Spec: v1.AIInferenceSpec{Model: uri},
		},
		"engines v1alpha1 does not know": {
			Spec: v1.AIInferenceSpec{Model: uri, Engine: v1.EngineSpec{Name: v1.EngineSGLang}},
		},
		"revision next to a uri already holding one": {
			Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "hf://org/repo@main", Revision: "v2"}},
		},
		"hf uri holding a revision, no revision field": {
			Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "hf://org/repo@main"}},
		},
		"invalid revision": {
			Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "hf://org/repo", Revision: "x y"}},
		},
		"invalid uris": {
			Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "not a uri"}, GPU: &v1.GPUSpec{Products: []string{"", "NVIDIA-L4"}}},
		},
		"status": {
			Spec: v1.AIInferenceSpec{Model: uri},
			Status: v1.AIInferenceStatus{
				ObservedGeneration: 7, Phase: v1.PhaseFailed, ReadyReplicas: 1, ModelLoaded: true,
				LastTransitionTime: &metav1.Time{Time: metav1.Unix(1_700_000_000, 0).UTC()},
				Conditions: []metav1.Condition{{
					Type: "Ready", Status: metav1.ConditionFalse, ObservedGeneration: 7, Reason: "OutOfMemory", Message: "显存不足",
					LastTransitionTime: metav1.Unix(1_700_000_000, 0).Rfc3339Copy(),
				}},
			},
		},
		"pvc cache with a size limit and a claim": {
			Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{
				URI: "s3://models/llama", Cache: &v1.CacheSpec{Medium: v1.CachePVC, SizeLimit: ptrTo(resource.MustParse("100Gi")), ClaimName: "w"},
			}},
		},
		"rich": RichHub(),
	}
}

// UserAnnotations is obj's annotations but the conversion one, never nil.
func UserAnnotations(obj metav1.Object) map[string]string {
	a := maps.Clone(obj.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	delete(a, convdata.Annotation)
	return a
}

func ptrTo[T any](v T) *T { return &v }
