/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

// Package conversiontest holds the test machinery the AIInference
// conversion tests of every spoke version share: a seeded filler that makes
// random objects whose values survive JSON (as the conversion annotation
// and the API server need), round-trip checks, and fuzz loops over them.
//
// It is imported by tests only.
package conversiontest

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	"github.com/modelgate/modelgate/api/internal/convdata"
	v1 "github.com/modelgate/modelgate/api/v1"
)

// NewFiller returns a filler seeded with seed that fills any AIInference
// version with valid, JSON round-trippable values: canonical quantities,
// times in whole seconds (UTC), well-formed conditions, metadata with
// unicode names, labels and annotations but no managed fields, owner
// references or conversion annotation, and model URIs that are often
// valid hf:// URIs with a revision. extra adds or replaces fill funcs
// (func(*T, randfill.Continue)) for a spoke's own types.
func NewFiller(seed int64, extra ...any) *randfill.Filler {
	funcs := []any{
		fillTypeMeta, fillObjectMeta, fillTime, fillQuantity, fillCondition,
		fillModelSpec, fillCacheSpec, fillEngineName,
	}
	return randfill.NewWithSeed(seed).
		NilChance(0.25).
		NumElements(0, 3).
		Funcs(append(funcs, extra...)...)
}

// OneOf returns one of choices, at random.
func OneOf[T any](c randfill.Continue, choices ...T) T {
	return choices[c.Intn(len(choices))]
}

// names mixes DNS names with unicode ones: conversion must not care.
var names = []string{"llama-8b", "модель", "模型-推理", "llama-🦙", "ünïcödé.name", "x"}

// fillTypeMeta leaves TypeMeta empty: conversion does not set it (the
// webhook does), so a filled one could never round-trip.
func fillTypeMeta(tm *metav1.TypeMeta, _ randfill.Continue) { *tm = metav1.TypeMeta{} }

func fillObjectMeta(m *metav1.ObjectMeta, c randfill.Continue) {
	c.FillNoCustom(m)
	m.Name = OneOf(c, names...) + OneOf(c, "", "-"+c.String(8))
	m.ManagedFields = nil
	m.OwnerReferences = nil
	if c.Intn(4) > 0 {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations["example.com/note"] = OneOf(c, "ünïcödé 🦙 注释", `{"json":"looking"}`, c.String(0))
	}
	delete(m.Annotations, convdata.Annotation)
}

// fillTime makes a time JSON keeps exactly: whole seconds, UTC, never
// zero (a zero *metav1.Time comes back from JSON as nil).
func fillTime(t *metav1.Time, c randfill.Continue) {
	*t = metav1.NewTime(time.Unix(c.Int63n(4_000_000_000), 0).UTC())
}

// fillQuantity makes a canonical quantity such as 12Gi or 250m, with its
// string cached (as after any use) so that a deep copy stays equal.
func fillQuantity(q *resource.Quantity, c randfill.Continue) {
	v := resource.MustParse(fmt.Sprintf("%d%s", c.Intn(100_000), OneOf(c, "", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti")))
	_ = v.String()
	*q = v
}

func fillCondition(cond *metav1.Condition, c randfill.Continue) {
	*cond = metav1.Condition{
		Type:               OneOf(c, "Ready", "ModelLoaded", "Progressing", "Degraded"),
		Status:             OneOf(c, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown),
		ObservedGeneration: c.Int63n(1 << 40),
		Reason:             OneOf(c, "Fetching", "Serving", "ImagePullBackOff", "OutOfMemory"),
		Message:            c.String(0),
	}
	fillTime(&cond.LastTransitionTime, c)
}

func fillModelSpec(m *v1.ModelSpec, c randfill.Continue) {
	c.FillNoCustom(m)
	m.URI = ModelURI(c)
	m.Revision = Revision(c)
}

func fillCacheSpec(s *v1.CacheSpec, c randfill.Continue) {
	c.FillNoCustom(s)
	s.Medium = OneOf(c, v1.CacheDisk, v1.CacheMemory, v1.CachePVC, v1.CacheMedium(c.String(6)))
}

func fillEngineName(n *v1.EngineName, c randfill.Continue) {
	*n = OneOf(c, "", v1.EngineVLLM, v1.EngineSGLang, v1.EngineTGI, v1.EngineTriton, v1.EngineCustom, v1.EngineName(c.String(6)))
}

// modelURIs are fixed URIs, valid and not, that conversion must keep.
var modelURIs = []string{
	"hf://meta-llama/Llama-3.1-8B-Instruct",
	"hf://meta-llama/Llama-3.1-8B-Instruct@main",
	"hf://org/repo@0123456789abcdef0123456789abcdef01234567",
	"hf://org/repo@refs/pr/1",
	"hf://a/b@",
	"hf://a/b@x@y",
	"hf://a/b@x y",
	"hf://a@main",
	"s3://models/llama/8b",
	"s3://",
	"gs://bucket",
	"pvc://weights/llama",
	"https://example.com/model.tar?sig=1@2",
	"oci://registry.example.com/models/llama@sha256:" + strings.Repeat("ab", 32),
	"not a uri",
	"@main",
	"",
}

// ModelURI returns a model URI: a fixed one, a generated hf:// one with or
// without a revision, or any string.
func ModelURI(c randfill.Continue) string {
	switch c.Intn(4) {
	case 0:
		return c.String(0)
	case 1:
		uri := "hf://" + word(c) + "/" + word(c)
		if c.Bool() {
			uri += "@" + word(c) + OneOf(c, "", "/"+word(c), ".1")
		}
		return uri
	default:
		return OneOf(c, modelURIs...)
	}
}

// Revision returns a model revision, most often none.
func Revision(c randfill.Continue) string {
	return OneOf(c, "", "", "", "main", "v1.0", word(c), c.String(8))
}

// word is 1 to 8 characters any hf:// name or revision accepts.
func word(c randfill.Continue) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
	b := make([]byte, 1+c.Intn(8))
	for i := range b {
		b[i] = alphabet[c.Intn(len(alphabet))]
	}
	return string(b)
}

// RichHub is a v1 object using every field the spokes lack: two GPU
// products, minMemoryMiB, resources, scheduling, engine env and healthPath,
// a pvc cache with its claim, and a revision v1alpha1 joins to the URI.
func RichHub() *v1.AIInference {
	replicas := int32(3)
	return &v1.AIInference{
		ObjectMeta: metav1.ObjectMeta{
			Name: "llama-8b", Namespace: "serving", Generation: 4,
			Labels:      map[string]string{"team": "nlp"},
			Annotations: map[string]string{"example.com/owner": "nlp-team"},
		},
		Spec: v1.AIInferenceSpec{
			Model: v1.ModelSpec{
				URI:                  "hf://meta-llama/Llama-3.1-8B-Instruct",
				Revision:             "main",
				Cache:                &v1.CacheSpec{Medium: v1.CachePVC, ClaimName: "llama-weights"},
				CredentialsSecretRef: &v1.SecretReference{Name: "hf-token"},
			},
			Engine: v1.EngineSpec{
				Name: v1.EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, HealthPath: "/healthz",
				Args: []string{"--max-model-len=8192"},
				Env:  []corev1.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}},
			},
			GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 2, MinMemoryMiB: 81920},
			Replicas: &replicas,
			Warmup:   &v1.WarmupSpec{TimeoutSeconds: 600},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")},
			},
			Scheduling: &v1.SchedulingSpec{
				NodeSelector: map[string]string{"pool": "gpu"},
				Tolerations: []corev1.Toleration{{
					Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "inference", Effect: corev1.TaintEffectNoSchedule,
				}},
				PriorityClassName: "inference-high",
			},
		},
		Status: v1.AIInferenceStatus{ObservedGeneration: 4, Phase: v1.PhaseReady, ReadyReplicas: 3, ModelLoaded: true},
	}
}
