package validators

import (
	"strings"
	"testing"

	servingv1 "github.com/modelgate/modelgate/api/v1"
)

func TestAIInferenceAdvice(t *testing.T) {
	cases := map[string]struct {
		engine servingv1.EngineName
		uri    string
		args   []string
		want   string
	}{
		"triton, a model the loader fetches": {engine: servingv1.EngineTriton, uri: "s3://models/triton",
			want: "spec.engine.name triton: Triton loads every directory of its model repository as a model"},
		"triton, its repository on a claim": {engine: servingv1.EngineTriton, uri: "pvc://triton-repository"},
		"triton with another repository of the user's too: Triton reads both": {engine: servingv1.EngineTriton,
			uri: "gs://models/triton", args: []string{"--model-repository=/models/repository"},
			want: "spec.engine.name triton: Triton loads every directory of its model repository as a model"},
		"vllm": {engine: servingv1.EngineVLLM, uri: "hf://acme/llm"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &servingv1.AIInference{Spec: servingv1.AIInferenceSpec{
				Model:  servingv1.ModelSpec{URI: tc.uri},
				Engine: servingv1.EngineSpec{Name: tc.engine, Args: tc.args},
			}}
			s, errs := AIInferenceSettings(&obj.Spec)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			got := AIInferenceAdvice(obj, s)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("advice %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Errorf("advice %q, want one starting %q", got, tc.want)
			}
		})
	}
}
