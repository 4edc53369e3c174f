package validators

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
)

const gpuResource = corev1.ResourceName("nvidia.com/gpu")

// validAIInference is a v1 AIInference that uses every field, valid.
func validAIInference() *servingv1.AIInference {
	return &servingv1.AIInference{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "llama"},
		Spec: servingv1.AIInferenceSpec{
			Model: servingv1.ModelSpec{
				URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: "main",
				Cache:                &servingv1.CacheSpec{Medium: servingv1.CacheMemory, SizeLimit: ptr.To(resource.MustParse("32Gi"))},
				CredentialsSecretRef: &servingv1.SecretReference{Name: "hf-token"},
			},
			Engine: servingv1.EngineSpec{Name: servingv1.EngineSGLang, Port: 30000, HealthPath: "/health",
				Env: []corev1.EnvVar{{Name: "HF_HUB_OFFLINE", Value: "1"}}},
			GPU:      &servingv1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 2, MinMemoryMiB: 40960},
			Replicas: ptr.To[int32](2),
			Warmup:   &servingv1.WarmupSpec{TimeoutSeconds: 900},
			Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("64Gi")},
			},
			Scheduling: &servingv1.SchedulingSpec{
				NodeSelector:      map[string]string{"topology.kubernetes.io/zone": "us-east-1a"},
				Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}},
				PriorityClassName: "inference",
			},
		},
	}
}

func TestAIInferenceSettings(t *testing.T) {
	s, errs := ValidateAIInference(validAIInference(), gpuResource)
	if len(errs) > 0 {
		t.Fatalf("valid object: %v", errs.ToAggregate())
	}
	size := resource.MustParse("32Gi")
	want := annotations.Settings{
		Model: &annotations.ModelSettings{
			URI: annotations.ModelURI{Raw: "hf://meta-llama/Llama-3.1-8B-Instruct@main", Scheme: annotations.SchemeHF,
				Path: "meta-llama/Llama-3.1-8B-Instruct", Revision: "main"},
			MountPath:   annotations.DefaultModelMount,
			Cache:       annotations.Cache{Medium: annotations.CacheMemory},
			Size:        &size,
			Credentials: "hf-token",
		},
		GPU:     annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, MinMemoryMiB: 40960},
		Serving: annotations.ServingSettings{Engine: annotations.EngineSGLang, Port: 30000, HealthPath: "/health", WarmupTimeoutSeconds: 900},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
}

func TestValidateAIInference(t *testing.T) {
	tests := map[string]struct {
		edit func(*servingv1.AIInference)
		// want are the errors, "<field>: <type>" then a part of the detail.
		want []string
	}{
		"valid": {edit: func(*servingv1.AIInference) {}},
		"pvc cache with its claim": {edit: func(o *servingv1.AIInference) {
			o.Spec.Model.Cache = &servingv1.CacheSpec{Medium: servingv1.CachePVC, ClaimName: "model-cache"}
		}},
		"pvc model without cache": {edit: func(o *servingv1.AIInference) {
			o.Spec.Model = servingv1.ModelSpec{URI: "pvc://models/llama"}
		}},
		"unsupported scheme": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model = servingv1.ModelSpec{URI: "ftp://host/model"} },
			want: []string{`spec.model.uri: Invalid value: "ftp://host/model": unsupported scheme "ftp"`},
		},
		"revision on an s3 model": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.URI = "s3://acme-ml-models/llama" },
			want: []string{"spec.model.revision: Forbidden: revision is only for an hf:// uri"},
		},
		"revision twice": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.URI = "hf://meta-llama/Llama-3.1-8B@v1" },
			want: []string{"spec.model.revision: Forbidden: revision must not be set when uri already names one"},
		},
		"bad revision is reported at the revision": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.Revision = "a b" },
			want: []string{`spec.model.revision: Invalid value: "a b"`},
		},
		"cache on a pvc model": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.URI, o.Spec.Model.Revision = "pvc://models", "" },
			want: []string{"spec.model.cache: Forbidden: cache does not apply to a pvc:// model"},
		},
		"pvc cache: bad claim, and a size": {
			edit: func(o *servingv1.AIInference) {
				o.Spec.Model.Cache = &servingv1.CacheSpec{Medium: servingv1.CachePVC, ClaimName: "Bad_Claim", SizeLimit: ptr.To(resource.MustParse("1Gi"))}
			},
			want: []string{`spec.model.cache.claimName: Invalid value: "Bad_Claim"`, "spec.model.cache.sizeLimit: Forbidden"},
		},
		"claim without pvc": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.Cache.ClaimName = "model-cache" },
			want: []string{"spec.model.cache.claimName: Forbidden: claimName is only for medium pvc"},
		},
		"unknown cache medium": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.Cache.Medium = "ssd" },
			want: []string{`spec.model.cache.medium: Unsupported value: "ssd": supported values: "disk", "memory", "pvc"`},
		},
		"bad secret name": {
			edit: func(o *servingv1.AIInference) { o.Spec.Model.CredentialsSecretRef.Name = "HF_TOKEN" },
			want: []string{`spec.model.credentialsSecretRef.name: Invalid value: "HF_TOKEN": must be a Secret name`},
		},
		"bad and duplicate products": {
			edit: func(o *servingv1.AIInference) {
				o.Spec.GPU.Products = []string{"A100 80GB", "NVIDIA-L4", "NVIDIA-L4", ""}
			},
			want: []string{`spec.gpu.products[0]: Invalid value: "A100 80GB"`, `spec.gpu.products[2]: Duplicate value: "NVIDIA-L4"`,
				`spec.gpu.products[3]: Invalid value: "": must not be empty`},
		},
		"unknown engine": {
			edit: func(o *servingv1.AIInference) { o.Spec.Engine.Name = "llamacpp" },
			want: []string{`spec.engine.name: Invalid value: "llamacpp": must be one of: vllm, sglang, tgi, triton, custom`},
		},
		"custom engine without image and port": {
			edit: func(o *servingv1.AIInference) { o.Spec.Engine = servingv1.EngineSpec{Name: servingv1.EngineCustom} },
			want: []string{"spec.engine.image: Required value", "spec.engine.port: Required value"},
		},
		"port and health path out of range": {
			edit: func(o *servingv1.AIInference) { o.Spec.Engine.Port, o.Spec.Engine.HealthPath = 70000, "health" },
			want: []string{"spec.engine.port: Invalid value: 70000: must be a port number", `spec.engine.healthPath: Invalid value: "health"`},
		},
		"bad env name": {
			edit: func(o *servingv1.AIInference) { o.Spec.Engine.Env = []corev1.EnvVar{{Name: "1=x"}} },
			want: []string{`spec.engine.env[0].name: Invalid value: "1=x"`},
		},
		"warm-up too long": {
			edit: func(o *servingv1.AIInference) { o.Spec.Warmup.TimeoutSeconds = 86401 },
			want: []string{"spec.warmup.timeoutSeconds: Invalid value: 86401: must be from 1 to 86400 seconds"},
		},
		"replicas out of range": {
			edit: func(o *servingv1.AIInference) { o.Spec.Replicas = ptr.To[int32](-1) },
			want: []string{"spec.replicas: Invalid value: -1: must be from 0 to 1024"},
		},
		"GPUs in resources, request over limit": {
			edit: func(o *servingv1.AIInference) {
				o.Spec.Resources.Limits["amd.com/gpu"] = resource.MustParse("1")
				o.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("16")
			},
			want: []string{"spec.resources.limits[amd.com/gpu]: Forbidden: GPUs are asked with spec.gpu",
				`spec.resources.requests[cpu]: Invalid value: "16": must be less than or equal to the limit 8`},
		},
		"bad scheduling": {
			edit: func(o *servingv1.AIInference) {
				o.Spec.Scheduling = &servingv1.SchedulingSpec{
					NodeSelector:      map[string]string{"bad key!": "x"},
					PriorityClassName: "High",
					Tolerations: []corev1.Toleration{
						{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"},
						{Operator: corev1.TolerationOpEqual, Effect: "Sometimes"},
						{Key: "k", TolerationSeconds: ptr.To[int64](10), Effect: corev1.TaintEffectNoSchedule},
					},
				}
			},
			want: []string{`spec.scheduling.nodeSelector: Invalid value: "bad key!"`, `spec.scheduling.priorityClassName: Invalid value: "High"`,
				`spec.scheduling.tolerations[0].value: Invalid value: "v": must be empty when operator is Exists`,
				`spec.scheduling.tolerations[1].operator: Invalid value: "Equal": must be Exists when key is empty`,
				`spec.scheduling.tolerations[1].effect: Unsupported value: "Sometimes"`,
				`spec.scheduling.tolerations[2].effect: Invalid value: "NoSchedule": must be NoExecute when tolerationSeconds is set`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := validAIInference()
			tc.edit(obj)
			_, errs := ValidateAIInference(obj, gpuResource)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tc.want), errs.ToAggregate())
			}
			for i, want := range tc.want {
				if got := errs[i].Error(); !strings.Contains(got, want) {
					t.Errorf("error %d = %q, want it to contain %q", i, got, want)
				}
			}
		})
	}
}

func TestAIInferenceWorkload(t *testing.T) {
	obj := validAIInference()
	s, errs := ValidateAIInference(obj, gpuResource)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := AIInferenceWorkload(obj, s, gpuResource, AIInferenceRequest{Operation: "CREATE"})
	if w.Kind != "AIInference" || w.APIVersion != "serving.modelgate.io/v1" || w.ServingContainer != "sglang" {
		t.Errorf("kind %q apiVersion %q serving %q", w.Kind, w.APIVersion, w.ServingContainer)
	}
	c := w.PodSpec.Containers[0]
	if got := c.Resources.Limits[gpuResource]; got.Value() != 2 {
		t.Errorf("GPU limit = %s, want 2 (spec.gpu.count)", got.String())
	}
	if got := c.Resources.Limits[corev1.ResourceMemory]; got.String() != "64Gi" {
		t.Errorf("memory limit = %s, want 64Gi (spec.resources)", got.String())
	}
	if _, ok := obj.Spec.Resources.Limits[gpuResource]; ok {
		t.Error("the projection wrote the GPU limit into the object's own resources")
	}
	if w.PodSpec.PriorityClassName != "inference" || len(w.PodSpec.Tolerations) != 1 || w.PodSpec.NodeSelector["topology.kubernetes.io/zone"] != "us-east-1a" {
		t.Errorf("scheduling not projected: %+v", w.PodSpec)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 30000 {
		t.Errorf("ports = %v, want 30000", c.Ports)
	}
}
