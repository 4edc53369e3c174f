package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/modelgate/modelgate/api/install"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	servingv1alpha1 "github.com/modelgate/modelgate/api/v1alpha1"
	servingv1beta1 "github.com/modelgate/modelgate/api/v1beta1"
)

const reviewObjects = 100

// richV1 uses every v1 field, so that reading it in an older version
// writes the conversion annotation.
func richV1(i int) *servingv1.AIInference {
	return &servingv1.AIInference{
		TypeMeta: metav1.TypeMeta{APIVersion: servingv1.GroupVersion.String(), Kind: "AIInference"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("llama-%d", i), UID: types.UID(fmt.Sprint(i)),
			Labels: map[string]string{"app": "llama", "modelgate.io/team": "nlp"}, Generation: 3, ResourceVersion: "12345"},
		Spec: servingv1.AIInferenceSpec{
			Model: servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-70B-Instruct", Revision: "0e9e39f249a16976918f6564b8830bc894c89659",
				Cache: &servingv1.CacheSpec{Medium: servingv1.CachePVC, ClaimName: "model-cache"}, CredentialsSecretRef: &servingv1.SecretReference{Name: "hf-token"}},
			Engine: servingv1.EngineSpec{Name: servingv1.EngineVLLM, Port: 8000, HealthPath: "/health", Args: []string{"--tensor-parallel-size=4"},
				Env: []corev1.EnvVar{{Name: "HF_HUB_OFFLINE", Value: "1"}}},
			GPU:       &servingv1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 4, MinMemoryMiB: 81920},
			Replicas:  ptr.To[int32](2),
			Warmup:    &servingv1.WarmupSpec{TimeoutSeconds: 1200},
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Gi")}},
			Scheduling: &servingv1.SchedulingSpec{PriorityClassName: "inference",
				Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}},
		},
		Status: servingv1.AIInferenceStatus{Phase: servingv1.PhaseReady, ReadyReplicas: 2, ModelLoaded: true, ObservedGeneration: 3,
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Serving", Message: "2 of 2 replicas serve",
				LastTransitionTime: metav1.Unix(1_800_000_000, 0)}}},
	}
}

func alphaObject(i int) *servingv1alpha1.AIInference {
	return &servingv1alpha1.AIInference{
		TypeMeta: metav1.TypeMeta{APIVersion: servingv1alpha1.GroupVersion.String(), Kind: "AIInference"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("llama-%d", i), UID: types.UID(fmt.Sprint(i)),
			Labels: map[string]string{"app": "llama"}, ResourceVersion: "12345"},
		Spec: servingv1alpha1.AIInferenceSpec{ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@main", Engine: servingv1alpha1.EngineVLLM,
			GPU: &servingv1alpha1.GPU{ProductLabel: "NVIDIA-A100-SXM4-80GB", Count: 1}, Replicas: ptr.To[int32](1), WarmupTimeoutSeconds: ptr.To[int32](600)},
	}
}

// conversionReview encodes a ConversionReview of the objects to desired.
func conversionReview(b *testing.B, desired string, objs []runtime.Object) []byte {
	b.Helper()
	req := &apiextensionsv1.ConversionRequest{UID: "review", DesiredAPIVersion: desired}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			b.Fatal(err)
		}
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: raw})
	}
	body, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"}, Request: req})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkConversionReview measures what the API server waits for when it
// reads or writes 100 AIInferences in a version other than v1 (a list, a
// watch cache fill): one ConversionReview through /convert, from request
// bytes to response bytes. The baseline, in the same run, is the floor any
// conversion pays: decoding the review and each object into its Go type
// and encoding the response, with no conversion at all.
func BenchmarkConversionReview(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := install.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	handler := conversion.NewWebhookHandler(scheme, conversion.NewRegistry())
	rich, alpha := make([]runtime.Object, reviewObjects), make([]runtime.Object, reviewObjects)
	for i := range reviewObjects {
		rich[i], alpha[i] = richV1(i), alphaObject(i)
	}
	cases := []struct {
		name, desired string
		objs          []runtime.Object
	}{
		{"v1alpha1-to-v1", servingv1.GroupVersion.String(), alpha},
		{"v1-to-v1alpha1-with-annotation", servingv1alpha1.GroupVersion.String(), rich},
		{"v1-to-v1beta1-with-annotation", servingv1beta1.GroupVersion.String(), rich},
	}
	for _, tc := range cases {
		body := conversionReview(b, tc.desired, tc.objs)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)))
				if rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte(`"status":"Failure"`)) {
					b.Fatalf("conversion failed: %d %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
	body := conversionReview(b, servingv1.GroupVersion.String(), rich)
	b.Run("baseline-decode-encode-only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			review := &apiextensionsv1.ConversionReview{}
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(review); err != nil {
				b.Fatal(err)
			}
			out := make([]runtime.RawExtension, 0, len(review.Request.Objects))
			for _, raw := range review.Request.Objects {
				obj := &servingv1.AIInference{}
				if err := json.Unmarshal(raw.Raw, obj); err != nil {
					b.Fatal(err)
				}
				out = append(out, runtime.RawExtension{Object: obj})
			}
			review.Response = &apiextensionsv1.ConversionResponse{UID: review.Request.UID, ConvertedObjects: out,
				Result: metav1.Status{Status: metav1.StatusSuccess}}
			review.Request = nil
			if err := json.NewEncoder(&bytes.Buffer{}).Encode(review); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkConvertObject isolates modelgate's own conversion code from the
// review's JSON work: one object, already decoded, converted.
func BenchmarkConvertObject(b *testing.B) {
	hub, alpha := richV1(0), alphaObject(0)
	b.Run("v1-to-v1alpha1-with-annotation", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := (&servingv1alpha1.AIInference{}).ConvertFrom(hub); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v1-to-v1beta1-with-annotation", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := (&servingv1beta1.AIInference{}).ConvertFrom(hub); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("v1alpha1-to-v1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := alpha.ConvertTo(&servingv1.AIInference{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	spoke := &servingv1alpha1.AIInference{}
	if err := spoke.ConvertFrom(hub); err != nil {
		b.Fatal(err)
	}
	b.Run("v1alpha1-with-annotation-to-v1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := spoke.ConvertTo(&servingv1.AIInference{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
