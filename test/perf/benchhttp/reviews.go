package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook"
)

// teamNamespace is where the reviewed objects are; its labels come from
// fixedNamespaces, not an API server.
const teamNamespace = "team-a"

// nsTable is a fixed namespace-label source.
type nsTable map[string]map[string]string

func (t nsTable) NamespaceLabels(_ context.Context, name string) (map[string]string, error) {
	return t[name], nil
}

var fixedNamespaces = nsTable{teamNamespace: {"kubernetes.io/metadata.name": teamNamespace, "modelgate.io/team": "ml-platform"}}

// requester is who sends the objects: a developer.
var requester = authenticationv1.UserInfo{Username: "alice@example.com", Groups: []string{"system:authenticated"}}

// libraryPolicies compiles the policy library as its samples ship it
// (config/samples/policies), parameters included, as `modelgate test
// --policies` loads them.
func libraryPolicies(root string) ([]*policies.Compiled, error) {
	dir := filepath.Join(root, "config", "samples", "policies")
	compiled, err := offline.LoadPolicies(context.Background(), dir)
	if err != nil {
		return nil, fmt.Errorf("%w (run from the repository root or set --root)", err)
	}
	return compiled, nil
}

// vllmDeployment is a typical opted-in GPU Deployment: vLLM serving a
// pinned model from the Hub on an A100 or H100, with the labels and
// annotations such manifests carry.
func vllmDeployment() *appsv1.Deployment {
	labels := map[string]string{"app.kubernetes.io/name": "llm-server", "tier": "gpu"}
	annos := builders.SampleServingAnnotations(builders.SampleGPUProducts)
	annos["prometheus.io/scrape"], annos["prometheus.io/port"] = "true", "9090"
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNamespace, Name: "llm-server", Labels: map[string]string{
			"app.kubernetes.io/name": "llm-server", "app.kubernetes.io/part-of": "inference", "app.kubernetes.io/version": "1.0.0"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annos},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "server", Image: "vllm/vllm-openai:v0.6.3", Args: []string{"--model", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi")}},
				}}},
			},
		},
	}
}

// mutateAnswer is modelgate's mutating answer to the review body, as the
// /mutate handler gives it (the patch, its type, the warnings), as JSON
// without the UID: what the answering floor sends.
func mutateAnswer(body []byte, key *seal.Key) ([]byte, error) {
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &ar); err != nil {
		return nil, fmt.Errorf("the /mutate review does not decode: %w", err)
	}
	if ar.Request == nil {
		return nil, errors.New("the /mutate review has no request")
	}
	cfg := config.New()
	cfg.RecordKey = key
	h := webhook.NewMutating(cfg, fixedNamespaces, webhook.NewMetrics(nil))
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: *ar.Request})
	if !resp.Allowed || len(resp.Patch) == 0 {
		return nil, fmt.Errorf("/mutate does not patch the benchmark Deployment: allowed=%v, %d patch bytes", resp.Allowed, len(resp.Patch))
	}
	resp.UID = ""
	return json.Marshal(resp.AdmissionResponse)
}

// bodies are the request bodies the load sends: the vLLM Deployment's
// CREATE to /mutate, and to /validate the same Deployment as the mutating
// webhook leaves it (admitted offline by modelgate's own handlers, sealed
// with the key the server is given).
func bodies(root string, key *seal.Key) (mutate, validate []byte, err error) {
	raw, err := json.Marshal(vllmDeployment())
	if err != nil {
		return nil, nil, err
	}
	cfg := config.New()
	cfg.RecordKey = key
	compiled, err := libraryPolicies(root)
	if err != nil {
		return nil, nil, err
	}
	admitter, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, compiled), fixedNamespaces)
	if err != nil {
		return nil, nil, err
	}
	out, err := admitter.Admit(context.Background(), offline.Request{Object: raw, Namespace: teamNamespace, User: requester})
	if err != nil {
		return nil, nil, err
	}
	if out.Decision != offline.Allowed || !out.Mutated {
		return nil, nil, fmt.Errorf("the benchmark Deployment is not injected and allowed: %v %v", out.Decision, out.Denials)
	}
	if mutate, err = review(raw); err != nil {
		return nil, nil, err
	}
	if validate, err = review(out.Object); err != nil {
		return nil, nil, err
	}
	return mutate, validate, nil
}

// review is an AdmissionReview of a Deployment CREATE, as kube-apiserver
// sends it.
func review(obj []byte) ([]byte, error) {
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             "705ab4f5-6393-11e8-b7cc-42010a800002",
			Kind:            metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:        metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			RequestKind:     &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			RequestResource: &metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Name:            "llm-server",
			Namespace:       teamNamespace,
			Operation:       admissionv1.Create,
			UserInfo:        requester,
			Object:          runtime.RawExtension{Raw: obj},
			DryRun:          ptr.To(false),
			Options:         runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	}
	return json.Marshal(&r)
}
