package aiinference

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// The children are plain objects: the controller writes what the user
// asked for and the annotations that opt the pod template in, and
// modelgate's mutating webhook injects the loader, GPU placement and
// probes, exactly as for a Deployment written by hand. The controller
// never injects.

// InferenceLabel selects an AIInference's Pods: the Deployment's selector
// and the Service's.
const InferenceLabel = annotations.InferenceLabel

// ServingContainer is the name of the engine's container.
const ServingContainer = "server"

// Engine is how an engine is started: its image, and the command,
// arguments and environment that point it at the model. In Command, Args
// and Env values,
// {{model}} is what the engine loads (the Hugging Face repository for
// hf:// models, which the loader puts in the cache the engine reads;
// otherwise, and always for Triton, whose --model-repository is a
// directory, the directory the model is mounted at) and {{port}} the port.
type Engine struct {
	Image   string
	Command []string
	Args    []string
	// Env comes before the AIInference's spec.engine.env, which wins for a
	// variable both set.
	Env []corev1.EnvVar
}

// DefaultEngines are the engines' presets: each engine's current release
// and command line, as internal/enginefacts/engines.yaml records them with
// their sources (presets_facts_test.go holds them to it). Pin your own
// with spec.engine.image, or replace a preset in the Configuration.
var DefaultEngines = map[servingv1.EngineName]Engine{
	// The image's entrypoint is `vllm serve`, which takes the model as its
	// first argument (--model is deprecated there).
	servingv1.EngineVLLM: {Image: "vllm/vllm-openai:v0.33.0",
		Args: []string{"{{model}}", "--port", "{{port}}"}},
	// SGLang's image sets no entrypoint; `sglang serve` takes the model as
	// its first argument, and listens on loopback unless told otherwise:
	// probes come from the kubelet.
	servingv1.EngineSGLang: {Image: "lmsysorg/sglang:v0.5.23",
		Command: []string{"sglang", "serve"},
		Args:    []string{"{{model}}", "--host", "0.0.0.0", "--port", "{{port}}"}},
	// The image's entrypoint is text-generation-launcher; the image sets
	// PORT=80, which --port overrides. TGI is in maintenance mode since
	// December 2025: 3.3.7 is its last release.
	servingv1.EngineTGI: {Image: "ghcr.io/huggingface/text-generation-inference:3.3.7",
		Args: []string{"--model-id", "{{model}}", "--port", "{{port}}"}},
	// Triton's image sets no entrypoint.
	servingv1.EngineTriton: {Image: "nvcr.io/nvidia/tritonserver:26.09-py3",
		Command: []string{"tritonserver"},
		Args:    []string{"--model-repository", "{{model}}", "--http-port", "{{port}}"}},
}

// Deployment builds the AIInference's Deployment. Its name, namespace,
// selector and pod template come from the AIInference alone, so building
// it again from the same AIInference gives the same object; the caller
// sets the controller reference and applies it.
func Deployment(ai *servingv1.AIInference, engines map[servingv1.EngineName]Engine) (*appsv1.Deployment, error) {
	spec := &ai.Spec
	name := spec.Engine.Name
	if name == "" {
		name = servingv1.EngineVLLM
	}
	preset, known := engines[name]
	image := spec.Engine.Image
	if image == "" {
		image = preset.Image
	}
	if image == "" {
		return nil, fmt.Errorf("spec.engine.image: required for engine %q, which has no preset image", name)
	}
	port := spec.Engine.Port
	if port == 0 {
		return nil, fmt.Errorf("spec.engine.port: required (the defaulter sets the engine's preset)")
	}
	model := modelArg(spec.Model, name)
	replace := strings.NewReplacer("{{model}}", model, "{{port}}", strconv.Itoa(int(port)))
	expand := func(in []string) []string {
		var out []string
		for _, s := range in {
			out = append(out, replace.Replace(s))
		}
		return out
	}
	c := corev1.Container{
		Name:  ServingContainer,
		Image: image,
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
	}
	if known {
		c.Command = expand(preset.Command)
		c.Args = expand(preset.Args)
		for _, e := range preset.Env {
			if !slices.ContainsFunc(spec.Engine.Env, func(u corev1.EnvVar) bool { return u.Name == e.Name }) {
				e.Value = replace.Replace(e.Value)
				c.Env = append(c.Env, e)
			}
		}
	}
	c.Env = append(c.Env, spec.Engine.Env...)
	// The user's arguments come last: engines take the last of a repeated
	// flag.
	c.Args = append(c.Args, spec.Engine.Args...)
	if r := spec.Resources; r != nil {
		c.Resources = *r.DeepCopy()
	}

	labels := selectorLabels(ai)
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: templateAnnotations(ai, name, port)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
	if s := spec.Scheduling; s != nil {
		tpl.Spec.NodeSelector = maps.Clone(s.NodeSelector)
		tpl.Spec.Tolerations = slices.Clone(s.Tolerations)
		tpl.Spec.PriorityClassName = s.PriorityClassName
	}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: ai.Name, Namespace: ai.Namespace, Labels: childLabels(ai), Annotations: ownerAnnotations(ai)},
		Spec: appsv1.DeploymentSpec{
			Replicas: spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(labels)},
			Template: tpl,
		},
	}
	return d, nil
}

// Service builds the AIInference's ClusterIP Service: port 80 and the
// engine's port, both to the serving container's port.
func Service(ai *servingv1.AIInference) *corev1.Service {
	port := ai.Spec.Engine.Port
	ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}}
	if port != 80 && port != 0 {
		ports = append(ports, corev1.ServicePort{Name: "engine", Port: port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: ai.Name, Namespace: ai.Namespace, Labels: childLabels(ai)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selectorLabels(ai),
			Ports:    ports,
		},
	}
}

// selectorLabels select the AIInference's Pods.
func selectorLabels(ai *servingv1.AIInference) map[string]string {
	return map[string]string{InferenceLabel: ai.Name}
}

// childLabels are the children's own labels, with the owner and team
// modelgate stamped on the AIInference.
func childLabels(ai *servingv1.AIInference) map[string]string {
	l := map[string]string{
		InferenceLabel:                 ai.Name,
		"app.kubernetes.io/name":       ai.Name,
		"app.kubernetes.io/component":  "inference",
		"app.kubernetes.io/managed-by": "modelgate",
	}
	copyKeys(l, ai.Labels, annotations.OwnerLabel, annotations.TeamLabel)
	return l
}

// ownerAnnotations carry the AIInference's full owner name and the seal
// over its owner metadata onto the Deployment: the webhook keeps a sealed
// owner that modelgate's own service account passes on (a trusted
// requester, like the controllers that copy templates) and replaces one
// that is not sealed. Nil when the AIInference carries neither.
func ownerAnnotations(ai *servingv1.AIInference) map[string]string {
	a := map[string]string{}
	copyKeys(a, ai.Annotations, annotations.OwnerFull, annotations.Seal)
	if len(a) == 0 {
		return nil
	}
	return a
}

func copyKeys(dst, src map[string]string, keys ...string) {
	for _, k := range keys {
		if v, ok := src[k]; ok {
			dst[k] = v
		}
	}
}

// templateAnnotations opt the pod template in and say, in the webhook's
// annotations, what the spec says.
func templateAnnotations(ai *servingv1.AIInference, engine servingv1.EngineName, port int32) map[string]string {
	spec := &ai.Spec
	a := map[string]string{
		annotations.Inject:    "true",
		annotations.Model:     modelURI(spec.Model),
		annotations.Engine:    string(engine),
		annotations.Port:      strconv.Itoa(int(port)),
		annotations.Container: ServingContainer,
	}
	if spec.Engine.HealthPath != "" {
		a[annotations.HealthPath] = spec.Engine.HealthPath
	}
	if g := spec.GPU; g != nil {
		if g.Count > 0 {
			a[annotations.GPU] = strconv.Itoa(int(g.Count))
		}
		if len(g.Products) > 0 {
			a[annotations.GPUProduct] = strings.Join(g.Products, ",")
		}
		if g.MinMemoryMiB > 0 {
			a[annotations.GPUMemory] = strconv.Itoa(int(g.MinMemoryMiB))
		}
	}
	if w := spec.Warmup; w != nil && w.TimeoutSeconds > 0 {
		a[annotations.WarmupTimeout] = strconv.Itoa(int(w.TimeoutSeconds))
	}
	if c := spec.Model.Cache; c != nil {
		switch c.Medium {
		case servingv1.CacheMemory:
			a[annotations.ModelCache] = "memory"
		case servingv1.CachePVC:
			a[annotations.ModelCache] = "pvc:" + c.ClaimName
		}
		if c.SizeLimit != nil {
			a[annotations.ModelSize] = c.SizeLimit.String()
		}
	}
	if r := spec.Model.CredentialsSecretRef; r != nil {
		a[annotations.ModelCredentials] = r.Name
	}
	return a
}

// modelURI is the model annotation: the URI with its revision.
func modelURI(m servingv1.ModelSpec) string {
	if m.Revision == "" {
		return m.URI
	}
	return m.URI + "@" + m.Revision
}

// modelArg is what the engine is told to load: the repository of an hf://
// model (the loader fills the Hugging Face cache the webhook points the
// engine at, so `vllm serve org/model` finds it offline), else, and for
// Triton, which reads a directory, the mount.
func modelArg(m servingv1.ModelSpec, engine servingv1.EngineName) string {
	if repo, ok := strings.CutPrefix(m.URI, "hf://"); ok && engine != servingv1.EngineTriton {
		return repo
	}
	return annotations.DefaultModelMount
}
