package aiinference

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestSettledFingerprint: a child stays settled only while both what the
// controller would apply and the live object's compared fields are the
// same; its status (which changes with every Pod) does not count.
func TestSettledFingerprint(t *testing.T) {
	built, err := Deployment(sampleV1(t), DefaultEngines)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(built)
	if err != nil {
		t.Fatal(err)
	}
	applied := &unstructured.Unstructured{Object: u}
	live := built.DeepCopy()
	key := types.NamespacedName{Namespace: live.Namespace, Name: live.Name}
	var s settledChildren
	fp := fingerprint(applied, live)
	s.remember("Deployment", key, fp)

	statusOnly := live.DeepCopy()
	statusOnly.Status = appsv1.DeploymentStatus{ReadyReplicas: 2, Replicas: 2}
	statusOnly.ResourceVersion = "42"
	if !s.is("Deployment", key, fingerprint(applied, statusOnly)) {
		t.Error("a status change unsettled the child")
	}
	edited := live.DeepCopy()
	edited.Spec.Replicas = ptr.To[int32](7) // kubectl edit of the Deployment
	if s.is("Deployment", key, fingerprint(applied, edited)) {
		t.Error("another writer's change to the spec left the child settled: the controller would not restore it")
	}
	annotated := live.DeepCopy()
	annotated.Annotations = map[string]string{"team.example.com/note": "x"}
	if s.is("Deployment", key, fingerprint(applied, annotated)) {
		t.Error("a new annotation left the child settled")
	}
	changed := applied.DeepCopy()
	if err := unstructured.SetNestedField(changed.Object, int64(5), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if s.is("Deployment", key, fingerprint(changed, live)) {
		t.Error("a changed AIInference left the child settled")
	}
	if s.is("Service", key, fp) {
		t.Error("the Deployment's fingerprint settled the Service")
	}
	s.forget(key)
	if s.is("Deployment", key, fp) {
		t.Error("forget kept the child")
	}
}
