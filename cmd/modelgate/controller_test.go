package main

import (
	"testing"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/controller/aiinference"
)

// TestEngines: a Configuration preset replaces the built-in one of its
// name as a whole, the others stay, and the built-in presets are left as
// they are.
func TestEngines(t *testing.T) {
	before := aiinference.DefaultEngines[servingv1.EngineVLLM].Image
	got := engines(map[string]config.EnginePreset{
		"vllm": {Image: "registry.example/vllm:1", Env: []config.EnvVar{{Name: "VLLM_LOGGING_LEVEL", Value: "WARNING"}}},
	})
	vllm := got[servingv1.EngineVLLM]
	if vllm.Image != "registry.example/vllm:1" || len(vllm.Args) != 0 || len(vllm.Env) != 1 || vllm.Env[0].Value != "WARNING" {
		t.Errorf("vllm = %+v, want the Configuration's preset whole", vllm)
	}
	if got[servingv1.EngineSGLang].Image != aiinference.DefaultEngines[servingv1.EngineSGLang].Image {
		t.Errorf("sglang = %+v, want the built-in preset", got[servingv1.EngineSGLang])
	}
	if aiinference.DefaultEngines[servingv1.EngineVLLM].Image != before {
		t.Error("the built-in presets were changed")
	}
}
