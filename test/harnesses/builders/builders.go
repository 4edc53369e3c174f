// Package builders makes the Pods and workloads that modelgate's tests
// admit: minimal valid objects, with annotations and labels placed on the
// object or on its pod template.
package builders

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kinds are the kinds modelgate injects, in the order tests iterate them.
var Kinds = []string{"Pod", "Deployment", "StatefulSet", "Job", "CronJob"}

// Options places metadata on the built object.
type Options struct {
	Namespace, Name string
	// Annotations and Labels go on the object's own metadata.
	Annotations, Labels map[string]string
	// TemplateAnnotations and TemplateLabels go on the pod template (for a
	// Pod, on the Pod itself, merged with the above).
	TemplateAnnotations, TemplateLabels map[string]string
}

// New builds an object of the given kind (one of Kinds).
func New(kind string, o Options) client.Object {
	switch kind {
	case "Pod":
		p := &corev1.Pod{ObjectMeta: meta(o), Spec: podSpec(corev1.RestartPolicyAlways)}
		p.Annotations = merge(p.Annotations, o.TemplateAnnotations)
		p.Labels = merge(p.Labels, o.TemplateLabels)
		return p
	case "Deployment":
		return &appsv1.Deployment{ObjectMeta: meta(o), Spec: appsv1.DeploymentSpec{
			Selector: selector(o), Template: template(o, corev1.RestartPolicyAlways)}}
	case "StatefulSet":
		return &appsv1.StatefulSet{ObjectMeta: meta(o), Spec: appsv1.StatefulSetSpec{
			Selector: selector(o), Template: template(o, corev1.RestartPolicyAlways)}}
	case "Job":
		return &batchv1.Job{ObjectMeta: meta(o), Spec: batchv1.JobSpec{
			Template: template(o, corev1.RestartPolicyNever)}}
	case "CronJob":
		return &batchv1.CronJob{ObjectMeta: meta(o), Spec: batchv1.CronJobSpec{
			Schedule: "*/5 * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: template(o, corev1.RestartPolicyNever)}},
		}}
	default:
		panic("builders: unknown kind " + kind)
	}
}

// Empty returns an empty object of the kind, to Get into.
func Empty(kind string) client.Object {
	switch kind {
	case "Pod":
		return &corev1.Pod{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "StatefulSet":
		return &appsv1.StatefulSet{}
	case "Job":
		return &batchv1.Job{}
	case "CronJob":
		return &batchv1.CronJob{}
	default:
		panic("builders: unknown kind " + kind)
	}
}

// PodSpecOf returns the object's pod spec: a Pod's own, or its pod
// template's.
func PodSpecOf(obj client.Object) *corev1.PodSpec {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.Spec
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *batchv1.Job:
		return &o.Spec.Template.Spec
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.Spec
	default:
		panic(fmt.Sprintf("builders: no pod spec in %T", obj))
	}
}

// PodTemplateMeta returns the metadata of the object's pod template, or the
// Pod's own.
func PodTemplateMeta(obj client.Object) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.ObjectMeta
	case *appsv1.Deployment:
		return &o.Spec.Template.ObjectMeta
	case *appsv1.StatefulSet:
		return &o.Spec.Template.ObjectMeta
	case *batchv1.Job:
		return &o.Spec.Template.ObjectMeta
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.ObjectMeta
	default:
		panic("builders: unknown object type")
	}
}

func meta(o Options) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name,
		Annotations: clone(o.Annotations), Labels: clone(o.Labels)}
}

func selector(o Options) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": o.Name}}
}

func template(o Options, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      merge(map[string]string{"app": o.Name}, o.TemplateLabels),
			Annotations: clone(o.TemplateAnnotations),
		},
		Spec: podSpec(restart),
	}
}

func podSpec(restart corev1.RestartPolicy) corev1.PodSpec {
	return corev1.PodSpec{
		RestartPolicy: restart,
		Containers:    []corev1.Container{{Name: "server", Image: "registry.example.com/llm/server:1.0"}},
	}
}

func clone(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func merge(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := clone(a)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
