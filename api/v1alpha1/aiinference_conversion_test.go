/*
Copyright The modelgate Authors.

Licensed under the Apache License, Version 2.0 (the "License").
*/

package v1alpha1

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

// spokeFuncs make v1alpha1 specs whose modelSource is often an hf:// URI
// with a revision, and whose engine is often one v1alpha1 does not know.
var spokeFuncs = []any{
	func(s *AIInferenceSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		s.ModelSource = conversiontest.ModelURI(c)
	},
	func(e *Engine, c randfill.Continue) {
		*e = conversiontest.OneOf(c, "", EngineVLLM, EngineTriton, EngineTGI, "sglang", Engine(c.String(6)))
	},
}

// hubFuncs make one v1 spec in three hold only what v1alpha1 can say, so
// that both branches of ConvertFrom (annotation or not) are fuzzed.
var hubFuncs = []any{
	func(s *v1.AIInferenceSpec, c randfill.Continue) {
		c.FillNoCustom(s)
		if c.Intn(3) > 0 {
			return
		}
		*s = v1.AIInferenceSpec{
			Model:    v1.ModelSpec{URI: s.Model.URI, Revision: s.Model.Revision},
			Engine:   v1.EngineSpec{Name: s.Engine.Name},
			GPU:      s.GPU,
			Replicas: s.Replicas,
			Warmup:   s.Warmup,
		}
		if s.GPU != nil {
			s.GPU.Products = s.GPU.Products[:min(1, len(s.GPU.Products))]
			s.GPU.MinMemoryMiB = 0
		}
	},
}

func TestFuzzSpokeHubSpoke(t *testing.T) {
	conversiontest.FuzzSpokeHubSpoke[AIInference](t, conversiontest.Coverage{
		"hf revision split":   func(c conversiontest.Case) bool { return c.Hub.Spec.Model.Revision != "" },
		"no gpu":              func(c conversiontest.Case) bool { return c.Hub.Spec.GPU == nil },
		"gpu without product": func(c conversiontest.Case) bool { return c.Hub.Spec.GPU != nil && c.Hub.Spec.GPU.Products == nil },
		"gpu with product":    func(c conversiontest.Case) bool { return c.Hub.Spec.GPU != nil && len(c.Hub.Spec.GPU.Products) == 1 },
	}, spokeFuncs...)
}

func TestFuzzHubSpokeHub(t *testing.T) {
	conversiontest.FuzzHubSpokeHub[AIInference](t, conversiontest.Coverage{
		"annotated":     func(c conversiontest.Case) bool { return c.Annotated },
		"not annotated": func(c conversiontest.Case) bool { return !c.Annotated },
		"revision joined, not annotated": func(c conversiontest.Case) bool {
			return !c.Annotated && c.Hub.Spec.Model.Revision != ""
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
			in:   AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{ModelSource: "s3://models/llama"}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}}},
		},
		"hf revision splits into uri and revision": {
			in: AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@refs/pr/1"}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{
				Model: v1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "refs/pr/1"},
			}},
		},
		"not a uri is kept verbatim": {
			in:   AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{ModelSource: "not a uri"}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "not a uri"}}},
		},
		"hf with empty revision is kept verbatim": {
			in:   AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{ModelSource: "hf://a/b@"}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "hf://a/b@"}}},
		},
		"s3 without bucket is kept verbatim": {
			in:   AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{ModelSource: "s3://"}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://"}}},
		},
		"maximum values and a gpu without product": {
			in: AIInference{ObjectMeta: meta, Spec: AIInferenceSpec{
				ModelSource: "s3://models/llama", Engine: EngineTGI, GPU: &GPU{Count: 64},
				Replicas: ptr.To[int32](1024), WarmupTimeoutSeconds: ptr.To[int32](86400),
			}},
			want: v1.AIInference{ObjectMeta: meta, Spec: v1.AIInferenceSpec{
				Model: v1.ModelSpec{URI: "s3://models/llama"}, Engine: v1.EngineSpec{Name: v1.EngineTGI}, GPU: &v1.GPUSpec{Count: 64},
				Replicas: ptr.To[int32](1024), Warmup: &v1.WarmupSpec{TimeoutSeconds: 86400},
			}},
		},
		"unicode metadata": {
			in: AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "模型-推理", Labels: map[string]string{"app": "llama"}, Annotations: map[string]string{"example.com/note": "ünïcödé 🦙"}},
				Spec:       AIInferenceSpec{ModelSource: "pvc://weights"},
			},
			want: v1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "模型-推理", Labels: map[string]string{"app": "llama"}, Annotations: map[string]string{"example.com/note": "ünïcödé 🦙"}},
				Spec:       v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "pvc://weights"}},
			},
		},
		"malformed annotation is dropped and the spoke's fields win": {
			in: AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "llama", Annotations: map[string]string{convdata.Annotation: "{not json", "example.com/owner": "nlp"}},
				Spec:       AIInferenceSpec{ModelSource: "s3://models/llama", GPU: &GPU{ProductLabel: "NVIDIA-L4", Count: 1}, Replicas: ptr.To[int32](2)},
			},
			want: v1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Name: "llama", Annotations: map[string]string{"example.com/owner": "nlp"}},
				Spec: v1.AIInferenceSpec{
					Model: v1.ModelSpec{URI: "s3://models/llama"}, GPU: &v1.GPUSpec{Products: []string{"NVIDIA-L4"}, Count: 1}, Replicas: ptr.To[int32](2),
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
				ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@main", Engine: EngineVLLM,
				GPU: &GPU{ProductLabel: "NVIDIA-A100-SXM4-80GB", Count: 2}, Replicas: ptr.To[int32](3), WarmupTimeoutSeconds: ptr.To[int32](600),
			},
			annotated: true,
		},
		"no gpu, warmup or replicas": {
			in:   &v1.AIInference{Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}}},
			want: AIInferenceSpec{ModelSource: "s3://models/llama"},
		},
		"revision joins the uri": {
			in:   &v1.AIInference{Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "hf://org/repo", Revision: "v1.0"}}},
			want: AIInferenceSpec{ModelSource: "hf://org/repo@v1.0"},
		},
		"empty lists need no annotation": {
			in: &v1.AIInference{Spec: v1.AIInferenceSpec{
				Model:  v1.ModelSpec{URI: "s3://models/llama"},
				Engine: v1.EngineSpec{Args: []string{}, Env: []corev1.EnvVar{}},
				GPU:    &v1.GPUSpec{Products: []string{}, Count: 1},
			}},
			want: AIInferenceSpec{ModelSource: "s3://models/llama", GPU: &GPU{Count: 1}},
		},
		"maximum minMemoryMiB and port need the annotation": {
			in: &v1.AIInference{Spec: v1.AIInferenceSpec{
				Model: v1.ModelSpec{URI: "s3://models/llama"}, Engine: v1.EngineSpec{Name: v1.EngineVLLM, Port: 65535},
				GPU: &v1.GPUSpec{Count: 1, MinMemoryMiB: 1048576},
			}},
			want:      AIInferenceSpec{ModelSource: "s3://models/llama", Engine: EngineVLLM, GPU: &GPU{Count: 1}},
			annotated: true,
		},
		"a stale annotation on the hub is not passed on": {
			in: &v1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convdata.Annotation: `{"model":{"uri":"gs://old"}}`, "example.com/owner": "nlp"}},
				Spec:       v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}},
			},
			want: AIInferenceSpec{ModelSource: "s3://models/llama"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := conversiontest.ConvertFrom[AIInference](tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
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

// TestConvertToAfterEdit reads RichHub as v1alpha1, edits the spoke as a
// v1alpha1 client would, and converts it back: the edited fields win, the
// rest comes from the annotation, which the hub does not keep.
func TestConvertToAfterEdit(t *testing.T) {
	tests := map[string]struct {
		from *v1.AIInference // RichHub when nil
		edit func(*AIInference)
		want v1.AIInferenceSpec
	}{
		"gpu added, source and warmup changed": {
			from: &v1.AIInference{Spec: v1.AIInferenceSpec{Model: v1.ModelSpec{URI: "s3://models/llama"}, Engine: v1.EngineSpec{Name: v1.EngineVLLM, Port: 8000}}},
			edit: func(s *AIInference) {
				s.Spec.ModelSource, s.Spec.WarmupTimeoutSeconds = "hf://org/repo@v2", ptr.To[int32](900)
				s.Spec.GPU = &GPU{ProductLabel: "NVIDIA-L4", Count: 1}
			},
			want: v1.AIInferenceSpec{
				Model: v1.ModelSpec{URI: "hf://org/repo", Revision: "v2"}, Engine: v1.EngineSpec{Name: v1.EngineVLLM, Port: 8000},
				GPU: &v1.GPUSpec{Products: []string{"NVIDIA-L4"}, Count: 1}, Warmup: &v1.WarmupSpec{TimeoutSeconds: 900},
			},
		},
		"engine and gpu count changed: the old engine's settings go, its env, products and minMemoryMiB stay": {
			from: &v1.AIInference{Spec: v1.AIInferenceSpec{
				Model: v1.ModelSpec{URI: "s3://models/llama"},
				Engine: v1.EngineSpec{Name: v1.EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, HealthPath: "/healthz",
					Args: []string{"--max-model-len=8192"}, Env: []corev1.EnvVar{{Name: "HF_HUB_OFFLINE", Value: "1"}}},
				GPU: &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 1, MinMemoryMiB: 81920},
			}},
			edit: func(s *AIInference) { s.Spec.Engine, s.Spec.GPU.Count = EngineTGI, 4 },
			want: v1.AIInferenceSpec{
				Model:  v1.ModelSpec{URI: "s3://models/llama"},
				Engine: v1.EngineSpec{Name: v1.EngineTGI, Env: []corev1.EnvVar{{Name: "HF_HUB_OFFLINE", Value: "1"}}},
				GPU:    &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 4, MinMemoryMiB: 81920},
			},
		},
		"unchanged": {
			edit: func(*AIInference) {},
			want: conversiontest.RichHub().Spec,
		},
		"replicas changed": {
			edit: func(s *AIInference) { s.Spec.Replicas = ptr.To[int32](5) },
			want: v1.AIInferenceSpec{
				Model: v1.ModelSpec{
					URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
					Cache:                &v1.CacheSpec{Medium: v1.CachePVC, ClaimName: "llama-weights"},
					CredentialsSecretRef: &v1.SecretReference{Name: "hf-token"},
				},
				Engine: v1.EngineSpec{
					Name: v1.EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, HealthPath: "/healthz",
					Args: []string{"--max-model-len=8192"}, Env: []corev1.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}},
				},
				GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 2, MinMemoryMiB: 81920},
				Replicas: ptr.To[int32](5),
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
		"product label changed: it is the one product": {
			edit: func(s *AIInference) { s.Spec.GPU.ProductLabel = "NVIDIA-L40S" },
			want: v1.AIInferenceSpec{
				Model: v1.ModelSpec{
					URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
					Cache:                &v1.CacheSpec{Medium: v1.CachePVC, ClaimName: "llama-weights"},
					CredentialsSecretRef: &v1.SecretReference{Name: "hf-token"},
				},
				Engine: v1.EngineSpec{
					Name: v1.EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, HealthPath: "/healthz",
					Args: []string{"--max-model-len=8192"}, Env: []corev1.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}},
				},
				GPU:      &v1.GPUSpec{Products: []string{"NVIDIA-L40S"}, Count: 2, MinMemoryMiB: 81920},
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
		"gpu removed": {
			edit: func(s *AIInference) { s.Spec.GPU = nil },
			want: v1.AIInferenceSpec{
				Model: v1.ModelSpec{
					URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
					Cache:                &v1.CacheSpec{Medium: v1.CachePVC, ClaimName: "llama-weights"},
					CredentialsSecretRef: &v1.SecretReference{Name: "hf-token"},
				},
				Engine: v1.EngineSpec{
					Name: v1.EngineVLLM, Image: "vllm/vllm-openai:v0.6.0", Port: 8000, HealthPath: "/healthz",
					Args: []string{"--max-model-len=8192"}, Env: []corev1.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "DEBUG"}},
				},
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
			from := tc.from
			if from == nil {
				from = conversiontest.RichHub()
			}
			spoke, err := conversiontest.ConvertFrom[AIInference](from)
			if err != nil {
				t.Fatal(err)
			}
			if !conversiontest.HasAnnotation(spoke) {
				t.Fatal("the hub reads as v1alpha1 without the conversion annotation")
			}
			tc.edit(spoke)
			got, err := conversiontest.ConvertTo(spoke)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Spec); diff != "" {
				t.Errorf("ConvertTo spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(from.Annotations, got.Annotations); diff != "" {
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
		"empty object":                {},
		"hf revision":                 {Spec: AIInferenceSpec{ModelSource: "hf://org/repo@0123456789abcdef0123456789abcdef01234567"}},
		"not a uri":                   {Spec: AIInferenceSpec{ModelSource: "not a uri"}},
		"hf with empty revision":      {Spec: AIInferenceSpec{ModelSource: "hf://a/b@"}},
		"hf with two revisions":       {Spec: AIInferenceSpec{ModelSource: "hf://a/b@x@y"}},
		"s3 without bucket":           {Spec: AIInferenceSpec{ModelSource: "s3://"}},
		"empty gpu":                   {Spec: AIInferenceSpec{ModelSource: "s3://m", GPU: &GPU{}}},
		"engine v1alpha1 rejects":     {Spec: AIInferenceSpec{ModelSource: "s3://m", Engine: "sglang"}},
		"zero replicas and warmup":    {Spec: AIInferenceSpec{ModelSource: "s3://m", Replicas: new(int32), WarmupTimeoutSeconds: new(int32)}},
		"unicode metadata":            {ObjectMeta: metav1.ObjectMeta{Name: "модель-🦙", Annotations: map[string]string{"note": "注释"}}},
		"maximum values, one product": {Spec: AIInferenceSpec{ModelSource: "s3://m", GPU: &GPU{ProductLabel: "NVIDIA-H100-80GB-HBM3", Count: 64}, Replicas: ptr.To[int32](1024), WarmupTimeoutSeconds: ptr.To[int32](86400)}},
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
	edited.Spec.GPU.ProductLabel = "NVIDIA-L4"
	spokes := map[string]*AIInference{
		"annotated and edited": edited,
		"malformed annotation": {
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{convdata.Annotation: "{not json", "note": "x"}},
			Spec:       AIInferenceSpec{ModelSource: "hf://org/repo@main", GPU: &GPU{ProductLabel: "NVIDIA-L4"}},
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
