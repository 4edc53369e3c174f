package validators

import (
	"maps"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// AIInferenceKind and AIInferenceAPIVersion are what policies see in
// input.workload.kind and apiVersion for an AIInference, whatever version
// the client wrote: the webhook always judges the v1 form.
const (
	AIInferenceKind       = "AIInference"
	AIInferenceAPIVersion = "serving.modelgate.io/v1"
)

// AIInferenceRequest is the admission request an AIInference came in.
type AIInferenceRequest struct {
	Operation       string
	NamespaceLabels map[string]string
	UserInfo        authenticationv1.UserInfo
	// Raw and OldRaw are the v1 object and old object as JSON (OldRaw nil
	// on CREATE).
	Raw, OldRaw []byte
}

// AIInferenceWorkload projects a v1 AIInference onto the workload the
// policies judge, so that a policy written for Deployments reads it the
// same way: the pod each replica runs has one serving container, named
// after the engine, with the engine's image, port, args and env, the
// spec's resources and spec.gpu's count as its GPU limit; the pod carries
// the scheduling's node selector, tolerations and priority class. The
// model, GPU products and engine come from the settings, parsed as the
// injection annotations are. The result shares maps with obj: read only.
func AIInferenceWorkload(obj *servingv1.AIInference, s annotations.Settings, gpuResource corev1.ResourceName, req AIInferenceRequest) *Workload {
	spec := &obj.Spec
	name := string(s.Serving.Engine)
	if name == "" {
		name = string(servingv1.EngineVLLM)
	}
	c := corev1.Container{
		Name:  name,
		Image: spec.Engine.Image,
		Args:  spec.Engine.Args,
		Env:   spec.Engine.Env,
	}
	if spec.Engine.Port != 0 {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: spec.Engine.Port}}
	}
	if r := spec.Resources; r != nil {
		c.Resources = *r.DeepCopy()
	}
	if n := s.GPU.Count; n > 0 && gpuResource != "" {
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		} else {
			c.Resources.Limits = maps.Clone(c.Resources.Limits)
		}
		c.Resources.Limits[gpuResource] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	pod := &corev1.PodSpec{Containers: []corev1.Container{c}}
	if sc := spec.Scheduling; sc != nil {
		pod.NodeSelector = sc.NodeSelector
		pod.Tolerations = sc.Tolerations
		pod.PriorityClassName = sc.PriorityClassName
	}
	return &Workload{
		Kind:             AIInferenceKind,
		APIVersion:       AIInferenceAPIVersion,
		Operation:        req.Operation,
		Namespace:        obj.Namespace,
		NamespaceLabels:  req.NamespaceLabels,
		Object:           &obj.ObjectMeta,
		PodMeta:          &obj.ObjectMeta,
		PodSpec:          pod,
		Settings:         s,
		ServingContainer: name,
		UserInfo:         req.UserInfo,
		Raw:              req.Raw,
		OldRaw:           req.OldRaw,
	}
}
