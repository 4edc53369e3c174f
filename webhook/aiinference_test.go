package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
)

func TestDefaultAIInference(t *testing.T) {
	ports := NewAIInferenceDefaulter(config.New(), nil).Ports
	tests := map[string]struct {
		in, want servingv1.AIInferenceSpec
	}{
		"empty": {
			in: servingv1.AIInferenceSpec{Model: servingv1.ModelSpec{URI: "s3://b/m"}},
			want: servingv1.AIInferenceSpec{Model: servingv1.ModelSpec{URI: "s3://b/m"},
				Engine:   servingv1.EngineSpec{Name: servingv1.EngineVLLM, Port: 8000},
				Replicas: ptr.To[int32](1), Warmup: &servingv1.WarmupSpec{TimeoutSeconds: annotations.DefaultWarmupTimeoutSeconds}},
		},
		"engine presets and gpu count": {
			in: servingv1.AIInferenceSpec{Engine: servingv1.EngineSpec{Name: servingv1.EngineSGLang}, GPU: &servingv1.GPUSpec{Products: []string{"L4"}},
				Warmup: &servingv1.WarmupSpec{}},
			want: servingv1.AIInferenceSpec{Engine: servingv1.EngineSpec{Name: servingv1.EngineSGLang, Port: 30000},
				GPU:      &servingv1.GPUSpec{Products: []string{"L4"}, Count: 1},
				Replicas: ptr.To[int32](1), Warmup: &servingv1.WarmupSpec{TimeoutSeconds: 300}},
		},
		"what is set stays": {
			in: servingv1.AIInferenceSpec{Engine: servingv1.EngineSpec{Name: servingv1.EngineTGI, Port: 8080}, GPU: &servingv1.GPUSpec{Count: 4},
				Replicas: ptr.To[int32](0), Warmup: &servingv1.WarmupSpec{TimeoutSeconds: 60}},
			want: servingv1.AIInferenceSpec{Engine: servingv1.EngineSpec{Name: servingv1.EngineTGI, Port: 8080}, GPU: &servingv1.GPUSpec{Count: 4},
				Replicas: ptr.To[int32](0), Warmup: &servingv1.WarmupSpec{TimeoutSeconds: 60}},
		},
		"custom has no preset port": {
			in: servingv1.AIInferenceSpec{Engine: servingv1.EngineSpec{Name: servingv1.EngineCustom, Image: "example.com/srv:1"}},
			want: servingv1.AIInferenceSpec{Engine: servingv1.EngineSpec{Name: servingv1.EngineCustom, Image: "example.com/srv:1"},
				Replicas: ptr.To[int32](1), Warmup: &servingv1.WarmupSpec{TimeoutSeconds: 300}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := *tc.in.DeepCopy()
			DefaultAIInference(&got, ports)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("defaulted (-want +got):\n%s", diff)
			}
			again := *got.DeepCopy()
			DefaultAIInference(&again, ports)
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("defaulting twice changed the object (-once +twice):\n%s", diff)
			}
		})
	}
}

func TestFollowEngineChange(t *testing.T) {
	ports := NewAIInferenceDefaulter(config.New(), nil).Ports
	tests := map[string]struct {
		old      servingv1.EngineSpec
		in       servingv1.EngineSpec
		wantPort int32
	}{
		"vllm to tgi: the preset port follows":    {old: servingv1.EngineSpec{Name: "vllm", Port: 8000}, in: servingv1.EngineSpec{Name: "tgi", Port: 8000}, wantPort: 80},
		"unset name was vllm":                     {old: servingv1.EngineSpec{Port: 8000}, in: servingv1.EngineSpec{Name: "sglang", Port: 8000}, wantPort: 30000},
		"a chosen port stays":                     {old: servingv1.EngineSpec{Name: "vllm", Port: 9000}, in: servingv1.EngineSpec{Name: "tgi", Port: 9000}, wantPort: 9000},
		"same engine: nothing changes":            {old: servingv1.EngineSpec{Name: "tgi", Port: 80}, in: servingv1.EngineSpec{Name: "tgi", Port: 80}, wantPort: 80},
		"to custom: no preset, validation asks":   {old: servingv1.EngineSpec{Name: "vllm", Port: 8000}, in: servingv1.EngineSpec{Name: "custom", Port: 8000}, wantPort: 0},
		"vllm to triton: same preset port, stays": {old: servingv1.EngineSpec{Name: "vllm", Port: 8000}, in: servingv1.EngineSpec{Name: "triton", Port: 8000}, wantPort: 8000},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := servingv1.AIInferenceSpec{Engine: tc.in}
			FollowEngineChange(&spec, &tc.old, ports)
			DefaultAIInference(&spec, ports)
			if spec.Engine.Port != tc.wantPort {
				t.Errorf("port = %d, want %d", spec.Engine.Port, tc.wantPort)
			}
		})
	}
}
