/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1beta1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	"github.com/modelgate/modelgate/api/internal/convdata"
	"github.com/modelgate/modelgate/api/internal/conversiontest"
	v1 "github.com/modelgate/modelgate/api/v1"
)

// spokeFuncs make v1beta1 specs with realistic model URIs and revisions,
// and caches and engines v1beta1 does and does not accept.
var spokeFuncs = []any{
	func(m *ModelSpec, c randfill.Continue) {
		c.FillNoCustom(m)
		m.URI, m.Revision = conversiontest.ModelURI(c), conversiontest.Revision(c)
	},
	func(s *CacheSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		s.Medium = conversiontest.OneOf(c, CacheDisk, CacheMemory, "pvc", CacheMedium(c.String(6)))
	},
	func(n *EngineName, c randfill.Continue) {
		*n = conversiontest.OneOf(c, "", EngineVLLM, EngineSGLang, EngineTGI, EngineTriton, EngineCustom, EngineName(c.String(6)))
	},
}

// hubFuncs make one v1 spec in three hold only what v1beta1 can say, so
// that both branches of ConvertFrom (annotation or not) are fuzzed.
var hubFuncs = []any{
	func(s *v1.AIInferenceSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		if c.Intn(3) > 0 {
			return
		}
		s.Resources, s.Scheduling, s.Engine.Env, s.Engine.HealthPath = nil, nil, nil, ""
		if s.Model.Cache != nil {
			s.Model.Cache.ClaimName = ""
		}
	},
}

func TestFuzzSpokeHubSpoke(t *testing.T) {
	conversiontest.FuzzSpokeHubSpoke[AIInference](t, conversiontest.Coverage{
		"pvc cache": func(c conversiontest.Case) bool {
			return c.Hub.Spec.Model.Cache != nil && c.Hub.Spec.Model.Cache.Medium == v1.CachePVC
		},
		"several products": func(c conversiontest.Case) bool { return c.Hub.Spec.GPU != nil && len(c.Hub.Spec.GPU.Products) > 1 },
		"no gpu":           func(c conversiontest.Case) bool { return c.Hub.Spec.GPU == nil },
	}, spokeFuncs...)
}

func TestFuzzHubSpokeHub(t *testing.T) {
	conversiontest.FuzzHubSpokeHub[AIInference](t, conversiontest.Coverage{
		"annotated":     func(c conversiontest.Case) bool { return c.Annotated },
		"not annotated": func(c conversiontest.Case) bool { return !c.Annotated },
		"pvc claim kept": func(c conversiontest.Case) bool {
			return c.Annotated && c.Hub.Spec.Model.Cache != nil && c.Hub.Spec.Model.Cache.Medium == v1.CachePVC && c.Hub.Spec.Model.Cache.ClaimName != ""
		},
	}, hubFuncs...)
}

func TestConvertTo(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "llama", Namespace: "serving"}
	tests := map[string]struct {
		in   AIInference
		want v1.AIInference
	}{
		"no gpu, warmup or replicas": {
			in:   AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{Model: ModelSpec{URI: "s3://models/llama"}}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}}},
		},
		"maximum values": {
			in: AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{
				Model:    ModelSpec{URI: "hf://org/repo", Revision: "main"},
				Engine:   EngineSpec{Name: EngineCustom, Image: "registry.example.com/engine:v1", Port: 65535},
				GPU:      &GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 64, MinMemoryMiB: 1048576},
				Replicas: ptr.To[int32](1024), Warmup: &WarmupSpec{TimeoutSeconds: 86400},
			}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{
				Model:    v1.ModelSpec{URI: "hf://org/repo", Revision: "main"},
				Engine:   v1.EngineSpec{Name: v1.EngineCustom, Image: "registry.example.com/engine:v1", Port: 65535},
				GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 64, MinMemoryMiB: 1048576},
				Replicas: ptr.To[int32](1024), Warmup: &v1.WarmupSpec{TimeoutSeconds: 86400},
			}},
		},
		"invalid uri is kept verbatim": {
			in:   AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{Model: ModelSpec{URI: "hf://a/b@", Revision: "x y"}}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "hf://a/b@", Revision: "x y"}}},
		},
		"unicode metadata": {
			in: AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "模型-推理", Labels: map[string]string{"app": "llama"}, Annotations: map[string]string{"example.com/note": "ünïcödé 🦙"}},
				Spec:       AIInferenceSpec{Model: ModelSpec{URI: "pvc://weights"}},
			},
			want: v1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "模型-推理", Labels: map[string]string{"app": "llama"}, Annotations: map[string]string{"example.com/note": "ünïcödé 🦙"}},
				Spec:       v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "pvc://weights"}},
			},
		},
		"malformed annotation is dropped and the spoke's fields win": {
			in: AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "llama", Annotations: map[string]string{convdata.Annotation: "{not json", "example.com/owner": "nlp"}},
				Spec: AIInferenceSpec{
					Model:  ModelSpec{URI: "s3://models/llama", Cache: &CacheSpec{Medium: CacheMemory, SizeLimit: ptr.To(resource.MustParse("20Gi"))}},
					Engine: EngineSpec{Name: EngineTGI}, Replicas: ptr.To[int32](2),
				},
			},
			want: v1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "llama", Annotations: map[string]string{"example.com/owner": "nlp"}},
				Spec: v1.AIInferenceSpec{
					Model:  v1.ModelSpec{URI: "s3://models/llama", Cache: &v1.CacheSpec{Medium: v1.CacheMemory, SizeLimit: ptr.To(resource.MustParse("20Gi"))}},
					Engine: v1.EngineSpec{Name: v1.EngineTGI}, Replicas: ptr.To[int32](2),
				},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := conversiontest.ConvertTo(&tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got); diff != "" {
				t.Errorf("ConvertTo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertFrom(t *testing.T) {
	tests := map[string]struct {
		in        *v1.AIInference
		want      AIInferenceSpec
		annotated bool
	}{
		"v1-only fields go in the annotation": {
			in: conversiontest.RichHub(),
			want: AIInferenceSpec{
				Model: ModelSpec{
					URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
					Cache: &CacheSpec{Medium: "pvc"}, CredentialsSecretRef: &SecretReference{Name: "hf-token"},
				},
				Engine:   EngineSpec{Name: EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, Args: []string{"--max-model-len=8192"}},
				GPU:      &GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 2, MinMemoryMiB: 81920},
				Replicas: ptr.To[int32](3), Warmup: &WarmupSpec{TimeoutSeconds: 600},
			},
			annotated: true,
		},
		"no gpu, warmup or replicas": {
			in:   &v1.AIInference{Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}}},
			want: AIInferenceSpec{Model: ModelSpec{URI: "s3://models/llama"}},
		},
		"empty lists need no annotation": {
			in: &v1.AIInference{Spec: v1.AIInferenceSpec{
				Model:  v1.ModelSpec{URI: "s3://models/llama"},
				Engine: v1.EngineSpec{Args: []string{}, Env: []corev1.EnvVar{}},
				GPU:    &v1.GPUSpec{Products: []string{}, Count: 1},
			}},
			want: AIInferenceSpec{Model: ModelSpec{URI: "s3://models/llama"}, GPU: &GPUSpec{Count: 1}},
		},
		"empty resources need the annotation": {
			in:        &v1.AIInference{Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}, Resources: &corev1.ResourceRequirements{}}},
			want:      AIInferenceSpec{Model: ModelSpec{URI: "s3://models/llama"}},
			annotated: true,
		},
		"a health path alone needs the annotation": {
			in:        &v1.AIInference{Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}, Engine: v1.EngineSpec{Name: v1.EngineTGI, HealthPath: "/ready"}}},
			want:      AIInferenceSpec{Model: ModelSpec{URI: "s3://models/llama"}, Engine: EngineSpec{Name: EngineTGI}},
			annotated: true,
		},
		"a stale annotation on the hub is not passed on": {
			in: &v1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convdata.Annotation: `{"model":{"uri":"gs://old"}}`, "example.com/owner": "nlp"}},
				Spec:       v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}},
			},
			want: AIInferenceSpec{Model: ModelSpec{URI: "s3://models/llama"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := conversiontest.ConvertFrom[AIInference](tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := conversiontest.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("ConvertFrom spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(conversiontest.UserAnnotations(tc.in), conversiontest.UserAnnotations(got)); diff != "" {
				t.Errorf("ConvertFrom user annotations (-want +got):\n%s", diff)
			}
			if got := conversiontest.HasAnnotation(got); got != tc.annotated {
				t.Fatalf("ConvertFrom carries the conversion annotation: %t, want %t", got, tc.annotated)
			}
			if !tc.annotated {
				return
			}
			stored, err := conversiontest.StoredSpec(got)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(tc.in.Spec, stored) {
				t.Errorf("conversion annotation (-want +got):\n%s", conversiontest.Diff(tc.in.Spec, stored))
			}
		})
	}
}

// TestConvertToAfterEdit reads RichHub as v1beta1, edits the spoke as a
// v1beta1 client would, and converts it back: the v1-only fields come back
// from the annotation, but not those that belong to an edited field.
func TestConvertToAfterEdit(t *testing.T) {
	tests := map[string]struct {
		edit func(*AIInference)
		want v1.AIInferenceSpec
	}{
		"unchanged": {
			edit: func(*AIInference) {},
			want: conversiontest.RichHub().Spec,
		},
		"engine name changed: health path dropped, env kept": {
			edit: func(s *AIInference) { s.Spec.Engine.Name = EngineSGLang },
			want: v1.AIInferenceSpec{
				Model: v1.ModelSpec{
					URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
					Cache:                &v1.CacheSpec{Medium: v1.CachePVC, ClaimName: "llama-weights"},
					CredentialsSecretRef: &v1.SecretReference{Name: "hf-token"},
				},
				Engine: v1.EngineSpec{
					Name: v1.EngineSGLang, Image: "vllm/vllm-openai:v0.6.0", Port: 8000,
					Args: []string{"--max-model-len=8192"}, Env: []corev1.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}},
				},
				GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 2, MinMemoryMiB: 81920},
				Replicas: ptr.To[int32](3),
				Warmup:   &v1.WarmupSpec{TimeoutSeconds: 600},
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")},
				},
				Scheduling: &v1.SchedulingSpec{
					NodeSelector:      map[string]string{"pool": "gpu"},
					Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "inference", Effect: corev1.TaintEffectNoSchedule}},
					PriorityClassName: "inference-high",
				},
			},
		},
		"cache medium changed from pvc to disk: claim gone": {
			edit: func(s *AIInference) { s.Spec.Model.Cache.Medium = CacheDisk },
			want: v1.AIInferenceSpec{
				Model: v1.ModelSpec{
					URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
					Cache:                &v1.CacheSpec{Medium: v1.CacheDisk},
					CredentialsSecretRef: &v1.SecretReference{Name: "hf-token"},
				},
				Engine: v1.EngineSpec{
					Name: v1.EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, HealthPath: "/healthz",
					Args: []string{"--max-model-len=8192"}, Env: []corev1.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}},
				},
				GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 2, MinMemoryMiB: 81920},
				Replicas: ptr.To[int32](3),
				Warmup:   &v1.WarmupSpec{TimeoutSeconds: 600},
				Resources: &corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")},
				},
				Scheduling: &v1.SchedulingSpec{
					NodeSelector:      map[string]string{"pool": "gpu"},
					Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "inference", Effect: corev1.TaintEffectNoSchedule}},
					PriorityClassName: "inference-high",
				},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spoke, err := conversiontest.ConvertFrom[AIInference](conversiontest.RichHub())
			if err != nil {
				t.Fatal(err)
			}
			if !conversiontest.HasAnnotation(spoke) {
				t.Fatal("RichHub reads as v1beta1 without the conversion annotation")
			}
			tc.edit(spoke)
			got, err := conversiontest.ConvertTo(spoke)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("ConvertTo spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"example.com/owner": "nlp-team"}, got.Annotations); diff != "" {
				t.Errorf("ConvertTo annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRoundTripEdgeCases(t *testing.T) {
	for name, hub := range conversiontest.EdgeHubs() {
		t.Run("hub/"+name, func(t *testing.T) {
			for _, viaJSON := range []bool{false, true} {
				if _, err := conversiontest.HubRoundTrip[AIInference](hub, viaJSON); err != nil {
					t.Errorf("via JSON %t: %v", viaJSON, err)
				}
			}
		})
	}
	spokes := map[string]AIInference{
		"empty object":           {},
		"empty lists":            {Spec: AIInferenceSpec{Engine: EngineSpec{Args: []string{}}, GPU: &GPUSpec{Products: []string{}}}},
		"empty structs":          {Spec: AIInferenceSpec{Model: ModelSpec{Cache: &CacheSpec{}, CredentialsSecretRef: &SecretReference{}}, GPU: &GPUSpec{}, Warmup: &WarmupSpec{}}},
		"pvc cache, no claim":    {Spec: AIInferenceSpec{Model: ModelSpec{URI: "s3://m", Cache: &CacheSpec{Medium: "pvc"}}}},
		"invalid uri":            {Spec: AIInferenceSpec{Model: ModelSpec{URI: "not a uri", Revision: "@"}}},
		"unicode metadata":       {ObjectMeta: metav1.ObjectMeta{Name: "модель-🦙", Annotations: map[string]string{"note": "注释"}}},
		"zero replicas":          {Spec: AIInferenceSpec{Replicas: new(int32)}},
		"maximum values":         {Spec: AIInferenceSpec{Engine: EngineSpec{Port: 65535}, GPU: &GPUSpec{Count: 64, MinMemoryMiB: 1048576}, Replicas: ptr.To[int32](1024), Warmup: &WarmupSpec{TimeoutSeconds: 86400}}},
		"quantity not canonical": {Spec: AIInferenceSpec{Model: ModelSpec{Cache: &CacheSpec{Medium: CacheMemory, SizeLimit: ptr.To(resource.MustParse("1024Mi"))}}}},
	}
	for name, spoke := range spokes {
		t.Run("spoke/"+name, func(t *testing.T) {
			for _, viaJSON := range []bool{false, true} {
				if _, err := conversiontest.SpokeRoundTrip(&spoke, viaJSON); err != nil {
					t.Errorf("via JSON %t: %v", viaJSON, err)
				}
			}
		})
	}
}

func TestConversionLeavesSourceUnchanged(t *testing.T) {
	hubs := map[string]*v1.AIInference{
		"rich":             conversiontest.RichHub(),
		"stale annotation": {ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convdata.Annotation: "{}", "note": "x"}}},
	}
	for name, hub := range hubs {
		t.Run("ConvertFrom/"+name, func(t *testing.T) {
			if _, err := conversiontest.ConvertFrom[AIInference](hub); err != nil {
				t.Error(err)
			}
		})
	}
	edited, err := conversiontest.ConvertFrom[AIInference](conversiontest.RichHub())
	if err != nil {
		t.Fatal(err)
	}
	edited.Spec.Engine.Name, edited.Spec.Model.Cache.Medium = EngineTGI, CacheMemory
	spokes := map[string]*AIInference{
		"annotated and edited": edited,
		"malformed annotation": {
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convdata.Annotation: "{not json", "note": "x"}},
			Spec:       AIInferenceSpec{Model: ModelSpec{URI: "s3://m"}, GPU: &GPUSpec{Products: []string{"NVIDIA-L4"}}},
		},
	}
	for name, spoke := range spokes {
		t.Run("ConvertTo/"+name, func(t *testing.T) {
			if _, err := conversiontest.ConvertTo(spoke); err != nil {
				t.Error(err)
			}
		})
	}
}
