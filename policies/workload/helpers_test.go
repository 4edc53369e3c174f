package workload

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
)

const (
	gpuResource  = corev1.ResourceName("nvidia.com/gpu")
	productLabel = "nvidia.com/gpu.product"
	memoryLabel  = "nvidia.com/gpu.memory"
	commit       = "0123456789abcdef0123456789abcdef01234567"
)

// nvidia are NVIDIA's GPU keys, the Configuration's defaults.
var nvidia = GPUKeys{ResourceName: gpuResource, ProductLabel: productLabel, MemoryLabel: memoryLabel}

var alice = authenticationv1.UserInfo{
	Username: "alice@example.com", UID: "u-1", Groups: []string{"team-a", "system:authenticated"},
	Extra: map[string]authenticationv1.ExtraValue{"scopes": {"secret-scope"}},
}

// container is a container asking for the given GPU limit and request (""
// for none).
func container(name, limit, request string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example.com/" + name + ":1"}
	if limit != "" {
		c.Resources.Limits = corev1.ResourceList{gpuResource: resource.MustParse(limit)}
	}
	if request != "" {
		c.Resources.Requests = corev1.ResourceList{gpuResource: resource.MustParse(request)}
	}
	return c
}

// sidecar is a restartable init container asking for n GPUs.
func sidecar(name, n string) corev1.Container {
	c := container(name, n, "")
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

// term is a node selector term of the given requirements.
func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// requiredAffinity is an affinity requiring one of the terms.
func requiredAffinity(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

// parseModel is the model settings of a URI, parsed by the real parser.
func parseModel(t testing.TB, uri string) *annotations.ModelSettings {
	t.Helper()
	u, err := annotations.ParseModelURI(uri)
	if err != nil {
		t.Fatalf("ParseModelURI(%q): %v", uri, err)
	}
	return &annotations.ModelSettings{URI: u, MountPath: annotations.DefaultModelMount,
		Cache: annotations.Cache{Medium: annotations.CacheDisk}, Credentials: "hf-token"}
}

// vllmDeployment is a typical injected serving workload: a vLLM Deployment
// with modelgate's loader init container, probes, GPU limits and placement.
func vllmDeployment(t testing.TB) Source {
	object := &metav1.ObjectMeta{
		Name: "llama", Namespace: "team-a",
		Labels: map[string]string{"app": "llama", annotations.OwnerLabel: "alice-example.com",
			annotations.TeamLabel: "nlp"},
		Annotations: map[string]string{
			annotations.Model:    "hf://meta-llama/Llama-3.1-8B@" + commit,
			annotations.GPU:      "1",
			annotations.Engine:   "vllm",
			annotations.Injected: `{"mutators":["owner-meta","model-loader","gpu-placement","serving-probes"],"hash":"0a1b2c3d4e5f"}`,
		},
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(8000)}}, PeriodSeconds: 10}
	}
	vllm := container("vllm", "1", "1")
	vllm.Image = "vllm/vllm-openai:v0.6.0"
	vllm.Args = []string{"--model", "/models", "--port", "8000"}
	vllm.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}
	vllm.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Gi")
	vllm.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
	vllm.ReadinessProbe = probe("/health")
	vllm.StartupProbe = probe("/health")
	vllm.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		RunAsNonRoot:             ptr.To(true),
	}
	vllm.VolumeMounts = []corev1.VolumeMount{{Name: "model", MountPath: "/models", ReadOnly: true}}
	loader := corev1.Container{
		Name: "modelgate-loader", Image: "ghcr.io/modelgate/loader:v0.1.0",
		Args:         []string{"--uri", "hf://meta-llama/Llama-3.1-8B@" + commit, "--dest", "/models"},
		VolumeMounts: []corev1.VolumeMount{{Name: "model", MountPath: "/models"}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")}},
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}
	return Source{
		Kind: "Deployment", APIVersion: "apps/v1", Operation: "CREATE",
		Object: object, Sealed: true,
		PodMeta: &metav1.ObjectMeta{Labels: map[string]string{"app": "llama"},
			Annotations: map[string]string{"prometheus.io/scrape": "true"}},
		PodSpec: &corev1.PodSpec{
			InitContainers: []corev1.Container{loader},
			Containers:     []corev1.Container{vllm},
			Affinity:       requiredAffinity(term(req(productLabel, corev1.NodeSelectorOpIn, "NVIDIA-A100-SXM4-80GB"))),
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			Volumes:        []corev1.Volume{{Name: "model", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
		Settings: annotations.Settings{
			Model: parseModel(t, "hf://meta-llama/Llama-3.1-8B@"+commit),
			GPU:   annotations.GPUSettings{Count: 1, MinMemoryMiB: 40960},
			Serving: annotations.ServingSettings{Engine: annotations.EngineVLLM,
				WarmupTimeoutSeconds: annotations.DefaultWarmupTimeoutSeconds},
		},
		ServingContainer: "vllm",
		UserInfo:         alice,
		NamespaceLabels:  map[string]string{"kubernetes.io/metadata.name": "team-a", annotations.NamespaceTeam: "nlp"},
		GPU:              nvidia,
	}
}
