package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	servingv1 "github.com/modelgate/modelgate/api/v1"
	servingv1alpha1 "github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook"
)

// review is one kind of request in the mixed load: a body for a path, how
// often it is sent, and what a correct answer is.
type review struct {
	name   string
	path   string
	body   []byte
	weight int
	// check returns an error for an answer that is not the expected one.
	check func(body []byte) error
}

// The requester every review names: a developer, not a controller.
var requester = authenticationv1.UserInfo{Username: "alice@example.com", Groups: []string{"system:authenticated"}}

// vllmContainer is the serving container of the samples.
func vllmContainer() corev1.Container {
	return corev1.Container{Name: "server", Image: "vllm/vllm-openai:v0.6.3", Args: []string{"--model", "/models", "--port", "8000"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
			corev1.ResourceMemory: resource.MustParse("32Gi")}}}
}

// vllmDeployment is an opted-in vLLM Deployment in the team namespace.
func vllmDeployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: name, Labels: map[string]string{"app.kubernetes.io/name": name}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: builders.SampleServingAnnotations(builders.SampleGPUProducts)},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{vllmContainer()}},
			},
		},
	}
}

// notebookPod is an opted-in Pod asking for one GPU of a named product.
func notebookPod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: name, Annotations: map[string]string{
			"modelgate.io/inject": "true", "modelgate.io/gpu": "1", "modelgate.io/gpu-product": "NVIDIA-H100-80GB-HBM3",
			"modelgate.io/model": "s3://acme-ml-models/llama/8b", "modelgate.io/engine": "vllm",
		}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{vllmContainer()}},
	}
}

// deniedJob is an opted-in fine-tuning Job whose model bucket the
// library's allow-list refuses: a 403 answer, which is correct.
func deniedJob(name string) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: name},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
				"modelgate.io/inject": "true", "modelgate.io/model": "s3://scratch-bucket/ckpt", "modelgate.io/gpu": "8",
				"modelgate.io/gpu-product": "NVIDIA-H100-80GB-HBM3",
			}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
				{Name: "trainer", Image: "registry.example.com/ml/trainer:2.1", Command: []string{"torchrun", "train.py"}}}},
		}},
	}
}

// admissionReview encodes a review of obj (and old, for an UPDATE).
func admissionReview(uid string, gvk metav1.GroupVersionKind, resource string, op admissionv1.Operation, obj, old []byte) ([]byte, error) {
	req := &admissionv1.AdmissionRequest{
		UID: types.UID(uid), Kind: gvk, Resource: metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
		Namespace: teamNamespace, Name: "soak", Operation: op, UserInfo: requester,
		Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old},
	}
	b, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		return nil, fmt.Errorf("encoding a review: %w", err)
	}
	return b, nil
}

// admissionAnswer decodes an AdmissionReview answer and checks its UID.
func admissionAnswer(body []byte, uid string) (*admissionv1.AdmissionResponse, error) {
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("answer is not an AdmissionReview: %w", err)
	}
	if out.Response == nil {
		return nil, errors.New("AdmissionReview without a response")
	}
	if string(out.Response.UID) != uid {
		return nil, fmt.Errorf("answer for UID %q, want %q", out.Response.UID, uid)
	}
	if r := out.Response.Result; r != nil && r.Code >= http.StatusInternalServerError {
		return nil, fmt.Errorf("answer %d: %s", r.Code, r.Message)
	}
	return out.Response, nil
}

// expectAdmission checks an answer's verdict and whether it patched.
func expectAdmission(uid string, allowed, patched bool) func([]byte) error {
	return func(body []byte) error {
		r, err := admissionAnswer(body, uid)
		if err != nil {
			return err
		}
		if r.Allowed != allowed || (len(r.Patch) > 0) != patched {
			msg := ""
			if r.Result != nil {
				msg = r.Result.Message
			}
			return fmt.Errorf("allowed=%t patched=%t (%s), want allowed=%t patched=%t", r.Allowed, len(r.Patch) > 0, msg, allowed, patched)
		}
		return nil
	}
}

// conversionBody encodes a ConversionReview of objs to desired.
func conversionBody(uid, desired string, objs ...any) ([]byte, error) {
	req := &apiextensionsv1.ConversionRequest{UID: types.UID(uid), DesiredAPIVersion: desired}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("encoding an AIInference: %w", err)
		}
		req.Objects = append(req.Objects, runtime.RawExtension{Raw: raw})
	}
	b, err := json.Marshal(&apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"}, Request: req})
	if err != nil {
		return nil, fmt.Errorf("encoding a ConversionReview: %w", err)
	}
	return b, nil
}

// expectConversion checks a ConversionReview answer.
func expectConversion(uid string, n int) func([]byte) error {
	return func(body []byte) error {
		var out apiextensionsv1.ConversionReview
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("answer is not a ConversionReview: %w", err)
		}
		r := out.Response
		switch {
		case r == nil:
			return errors.New("ConversionReview without a response")
		case string(r.UID) != uid:
			return fmt.Errorf("answer for UID %q, want %q", r.UID, uid)
		case r.Result.Status != metav1.StatusSuccess:
			return fmt.Errorf("conversion failed: %s", r.Result.Message)
		case len(r.ConvertedObjects) != n:
			return fmt.Errorf("%d objects converted, want %d", len(r.ConvertedObjects), n)
		}
		return nil
	}
}

// alphaInference is an AIInference as a v1alpha1 client writes it.
func alphaInference(i int) *servingv1alpha1.AIInference {
	return &servingv1alpha1.AIInference{
		TypeMeta: metav1.TypeMeta{APIVersion: servingv1alpha1.GroupVersion.String(), Kind: "AIInference"},
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: fmt.Sprintf("llama-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			ResourceVersion: "12345"},
		Spec: servingv1alpha1.AIInferenceSpec{ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
			Engine: servingv1alpha1.EngineVLLM, GPU: &servingv1alpha1.GPU{ProductLabel: "NVIDIA-A100-SXM4-80GB", Count: 1},
			Replicas: ptr.To[int32](1), WarmupTimeoutSeconds: ptr.To[int32](600)},
	}
}

// v1Inference is an AIInference as stored (v1), with fields v1alpha1
// cannot show.
func v1Inference(i int) *servingv1.AIInference {
	return &servingv1.AIInference{
		TypeMeta: metav1.TypeMeta{APIVersion: servingv1.GroupVersion.String(), Kind: "AIInference"},
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: fmt.Sprintf("llama-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Labels: map[string]string{"app": "llama"}, Generation: 3, ResourceVersion: "12345"},
		Spec: servingv1.AIInferenceSpec{
			Model: servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-70B-Instruct", Revision: "0e9e39f249a16976918f6564b8830bc894c89659",
				Cache: &servingv1.CacheSpec{Medium: servingv1.CachePVC, ClaimName: "model-cache"}},
			Engine:   servingv1.EngineSpec{Name: servingv1.EngineVLLM, Port: 8000, HealthPath: "/health", Args: []string{"--tensor-parallel-size=4"}},
			GPU:      &servingv1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}, Count: 4, MinMemoryMiB: 81920},
			Replicas: ptr.To[int32](2),
		},
	}
}

// buildMix builds the mixed load. The validating reviews judge what the
// mutating webhook made of each workload, so the server under test first
// injects them once (post).
func buildMix(ctx context.Context, post func(ctx context.Context, path string, body []byte) (int, []byte, error)) ([]review, error) {
	// Every kind of the mix is served at v1.
	gvk := func(g, k string) metav1.GroupVersionKind {
		return metav1.GroupVersionKind{Group: g, Version: "v1", Kind: k}
	}
	deploy, pod, job := vllmDeployment("llm-server"), notebookPod("notebook"), deniedJob("finetune")
	var mix []review
	injected := map[string][]byte{}
	for _, w := range []struct {
		name     string
		gvk      metav1.GroupVersionKind
		resource string
		obj      any
		weight   int
	}{
		{"Deployment", gvk("apps", "Deployment"), "deployments", deploy, 20},
		{"Pod", gvk("", "Pod"), "pods", pod, 10},
		{"Job", gvk("batch", "Job"), "jobs", job, 5},
	} {
		raw, err := json.Marshal(w.obj)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", w.name, err)
		}
		uid := "mutate-" + w.name
		body, err := admissionReview(uid, w.gvk, w.resource, admissionv1.Create, raw, nil)
		if err != nil {
			return nil, err
		}
		code, answer, err := post(ctx, webhook.MutatePath, body)
		if err != nil {
			return nil, fmt.Errorf("injecting the %s once: %w", w.name, err)
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("injecting the %s once: %d", w.name, code)
		}
		r, err := admissionAnswer(answer, uid)
		if err != nil {
			return nil, fmt.Errorf("injecting the %s once: %w", w.name, err)
		}
		if !r.Allowed || len(r.Patch) == 0 {
			return nil, fmt.Errorf("injecting the %s once: want a patch, got %+v", w.name, r)
		}
		patch, err := jsonpatch.DecodePatch(r.Patch)
		if err != nil {
			return nil, fmt.Errorf("decoding the %s's patch: %w", w.name, err)
		}
		if injected[w.name], err = patch.Apply(raw); err != nil {
			return nil, fmt.Errorf("applying the %s's patch: %w", w.name, err)
		}
		mix = append(mix, review{name: "mutate " + w.name + " CREATE", path: webhook.MutatePath, body: body, weight: w.weight,
			check: expectAdmission(uid, true, true)})

		vuid := "validate-" + w.name
		vbody, err := admissionReview(vuid, w.gvk, w.resource, admissionv1.Create, injected[w.name], nil)
		if err != nil {
			return nil, err
		}
		allowed := w.name != "Job" // the Job's bucket is not on the allow-list
		mix = append(mix, review{name: "validate " + w.name + " CREATE", path: webhook.ValidatePath, body: vbody, weight: w.weight,
			check: expectAdmission(vuid, allowed, false)})
	}
	// A write of an injected Deployment that changes nothing: the most
	// common review of a real cluster (status, scale and label churn).
	ubody, err := admissionReview("update-Deployment", gvk("apps", "Deployment"), "deployments", admissionv1.Update,
		injected["Deployment"], injected["Deployment"])
	if err != nil {
		return nil, err
	}
	mix = append(mix, review{name: "mutate Deployment UPDATE (injected)", path: webhook.MutatePath, body: ubody, weight: 10,
		check: expectAdmission("update-Deployment", true, false)})

	alpha, rich := alphaInference(0), v1Inference(0)
	list := make([]any, 20)
	for i := range list {
		list[i] = alphaInference(i)
	}
	for _, c := range []struct {
		name, desired string
		objs          []any
		weight        int
	}{
		{"convert v1alpha1->v1", servingv1.GroupVersion.String(), []any{alpha}, 10},
		{"convert v1->v1alpha1", servingv1alpha1.GroupVersion.String(), []any{rich}, 5},
		{"convert 20 v1alpha1->v1", servingv1.GroupVersion.String(), list, 5},
	} {
		uid := "convert-" + c.name
		body, err := conversionBody(uid, c.desired, c.objs...)
		if err != nil {
			return nil, err
		}
		mix = append(mix, review{name: c.name, path: "/convert", body: body, weight: c.weight, check: expectConversion(uid, len(c.objs))})
	}
	// Every review once more, now as a check of the mix itself.
	for _, r := range mix {
		code, answer, err := post(ctx, r.path, r.body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("%s: %d", r.name, code)
		}
		if err := r.check(answer); err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return mix, nil
}

// picker spreads requests over the mix by weight, deterministically.
type picker []int

func newPicker(mix []review) picker {
	var p picker
	for i, r := range mix {
		for range r.weight {
			p = append(p, i)
		}
	}
	return p
}

// at returns the mix index of the n-th request.
func (p picker) at(n uint64) int { return p[(n*7919)%uint64(len(p))] }

// bodyReader returns a fresh reader over a body.
func bodyReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
