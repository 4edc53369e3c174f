package validators

import (
	"strings"
	"testing"

	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// FuzzValidateAIInference feeds the user-written strings of an AIInference
// spec to the validator: it must never panic, and an object it accepts
// must have parsed into a model and an engine.
func FuzzValidateAIInference(f *testing.F) {
	f.Add("hf://meta-llama/Llama-3.1-8B-Instruct", "main", "disk", "", "NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3", "vllm", "/health", "hf-token")
	f.Add("pvc://models/llama", "", "", "", "", "custom", "/v2/health/ready", "")
	f.Add("oci://registry.acme.internal/models/llama@sha256:"+strings.Repeat("a", 64), "", "pvc", "model-cache", "L4", "sglang", "", "")
	f.Add("s3://acme-ml-models/llama", "v1", "memory", "claim", ",,", "tgi", "health", "Bad_Name")
	f.Add("not a uri", "@", "ssd", "", "A100 80GB", "", "/", "")
	f.Fuzz(func(t *testing.T, uri, revision, medium, claim, products, engine, healthPath, secret string) {
		obj := validAIInference()
		obj.Spec.Model = servingv1.ModelSpec{URI: uri, Revision: revision}
		if medium != "" {
			obj.Spec.Model.Cache = &servingv1.CacheSpec{Medium: servingv1.CacheMedium(medium), ClaimName: claim}
		}
		if secret != "" {
			obj.Spec.Model.CredentialsSecretRef = &servingv1.SecretReference{Name: secret}
		}
		obj.Spec.GPU.Products = strings.Split(products, ",")
		obj.Spec.Engine = servingv1.EngineSpec{Name: servingv1.EngineName(engine), HealthPath: healthPath, Image: "img", Port: 8000}
		s, errs := ValidateAIInference(obj, gpuResource)
		if len(errs) == 0 && (s.Model == nil || s.Serving.Engine == "") {
			t.Fatalf("accepted without a model or engine: %+v", s)
		}
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec.") {
				t.Errorf("error without a spec field path: %v", e)
			}
		}
	})
}
