package builders

import (
	"fmt"
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
)

// GeneratedWorkloads are n workloads made by a math/rand generator seeded
// with seed, the kinds of Kinds in turn: what the policy library reads,
// in every place it can sit. GPUs in limits, requests, init containers
// and sidecars, MIG slices and another vendor's GPUs; products by
// annotation and by node affinity; models of every scheme, allowed and
// not, pinned and not; engines, readiness probes, opt-in and opt-out on
// the object or its template, hand-set owner and team labels, privileged
// containers, host namespaces and resource claims. Most are objects the
// API server takes; a few are not (a GPU request without an equal limit),
// as users write them. The same seed gives the same workloads.
func GeneratedWorkloads(seed uint64, n int) []client.Object {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) //nolint:gosec // test data, not secrets.
	out := make([]client.Object, 0, n)
	for i := range n {
		out = append(out, generated(r, i))
	}
	return out
}

// generatedProducts are GPU products: the library allows the first two
// everywhere, the others in sandbox only.
var generatedProducts = []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4", "Tesla-T4"}

// generatedModels are model URIs of each scheme, some the library allows
// (bucket acme-ml-models, the hf orgs it names, registry.acme.internal)
// and some not, pinned and not.
var generatedModels = []string{
	"hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
	"hf://meta-llama/Llama-3.1-8B-Instruct",
	"hf://mistralai/Mistral-7B-v0.3@main",
	"hf://someone/uncurated-model@0e9e39f249a16976918f6564b8830bc894c89659",
	"s3://acme-ml-models/llama-3.1-70b",
	"s3://scratch-bucket/llama",
	"gs://acme-ml-models/llama",
	"https://models.example.com/m.tar",
	"oci://registry.acme.internal/models/llama@sha256:" + strings.Repeat("ab", 32),
	"oci://registry.acme.internal/models/llama:v1",
	"oci://docker.io/someone/llama:latest",
	"pvc://model-cache/llama",
}

var generatedEngines = []string{"vllm", "sglang", "tgi"}

func generated(r *rand.Rand, i int) client.Object {
	kind := Kinds[i%len(Kinds)]
	name := fmt.Sprintf("gen-%03d-%s", i, strings.ToLower(kind))
	obj := New(kind, Options{Name: name})
	setTypeMeta(obj, kind)
	tpl := PodTemplateMeta(obj)
	spec := PodSpecOf(obj)

	// Opt-in and opt-out, on the template or on the object itself.
	onTemplate := map[string]string{}
	switch n := r.IntN(20); {
	case n < 11:
		onTemplate[annotations.Inject] = "true"
	case n < 13 && kind != "Pod":
		obj.SetAnnotations(map[string]string{annotations.Inject: "true"})
	case n < 15:
		onTemplate[annotations.Inject] = "false"
	}
	if r.IntN(2) == 0 {
		onTemplate[annotations.Model] = generatedModels[r.IntN(len(generatedModels))]
		onTemplate[annotations.ModelSize] = "20Gi"
	}
	if r.IntN(3) == 0 {
		onTemplate[annotations.Engine] = generatedEngines[r.IntN(len(generatedEngines))]
	}
	if r.IntN(2) == 0 {
		onTemplate[annotations.GPU] = []string{"1", "2", "4", "8", "16"}[r.IntN(5)]
		if r.IntN(3) > 0 {
			onTemplate[annotations.GPUProduct] = products(r)
		}
	}
	tpl.Annotations = merge(tpl.Annotations, onTemplate)
	if r.IntN(10) == 0 {
		// Set by hand: overwritten on what opts in, refused elsewhere.
		tpl.Labels = merge(tpl.Labels, map[string]string{annotations.OwnerLabel: "mallory", annotations.TeamLabel: "other"})
	}

	spec.Containers[0] = generatedContainer(r, "server")
	for j := range r.IntN(3) {
		spec.Containers = append(spec.Containers, generatedContainer(r, fmt.Sprintf("side-%d", j)))
	}
	for j := range r.IntN(3) {
		c := generatedContainer(r, fmt.Sprintf("init-%d", j))
		c.ReadinessProbe = nil
		if r.IntN(2) == 0 {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways) // a sidecar
		}
		spec.InitContainers = append(spec.InitContainers, c)
	}
	// What opts in mostly says which container serves, and gives the GPU
	// count once: modelgate refuses the ambiguous and the contradictory.
	if len(spec.Containers) > 1 && r.IntN(6) > 0 {
		tpl.Annotations = merge(tpl.Annotations, map[string]string{annotations.Container: "server"})
	}
	if _, ok := onTemplate[annotations.GPU]; ok && r.IntN(5) > 0 {
		delete(spec.Containers[0].Resources.Limits, "nvidia.com/gpu")
		delete(spec.Containers[0].Resources.Requests, "nvidia.com/gpu")
	}
	if r.IntN(6) == 0 {
		c := &spec.Containers[r.IntN(len(spec.Containers))]
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	switch r.IntN(12) {
	case 0:
		spec.HostNetwork = true
	case 1:
		spec.HostPID = true
	case 2:
		spec.HostIPC = true
	}
	if r.IntN(4) == 0 {
		spec.Affinity = productAffinity(r)
	}
	if r.IntN(8) == 0 {
		spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "accel", ResourceClaimTemplateName: ptr.To("gpu-template")}}
		spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "accel"}}
	}
	return obj
}

// generatedContainer is a container with, at random, GPUs in its limits
// (and an equal request, or rarely a different one), MIG slices, another
// vendor's GPUs and a readiness probe.
func generatedContainer(r *rand.Rand, name string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.acme.internal/llm/server:1.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
	add := func(res corev1.ResourceName, n int, request bool) {
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		c.Resources.Limits[res] = q
		if request {
			c.Resources.Requests[res] = q
		}
	}
	switch r.IntN(10) {
	case 0, 1, 2:
		add("nvidia.com/gpu", []int{1, 2, 4, 8, 9, 16}[r.IntN(6)], r.IntN(2) == 0)
	case 3:
		add("nvidia.com/mig-1g.10gb", 1+r.IntN(3), r.IntN(2) == 0)
	case 4:
		add("nvidia.com/gpu", 1+r.IntN(4), false)
		add("nvidia.com/mig-3g.40gb", 1, false)
	case 5:
		add("amd.com/gpu", 1+r.IntN(2), false)
	case 6:
		if r.IntN(3) == 0 {
			// A request without an equal limit: the API server itself
			// refuses it, before any admission policy.
			c.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("2")
		}
	}
	if r.IntN(3) == 0 {
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}
	}
	return c
}

func products(r *rand.Rand) string {
	ps := []string{generatedProducts[r.IntN(len(generatedProducts))]}
	if r.IntN(3) == 0 {
		ps = append(ps, generatedProducts[r.IntN(len(generatedProducts))])
	}
	if len(ps) == 2 && ps[0] == ps[1] {
		ps = ps[:1]
	}
	return strings.Join(ps, ",")
}

// productAffinity is a required node affinity on the GPU product label
// (In or NotIn), sometimes beside another label's term.
func productAffinity(r *rand.Rand) *corev1.Affinity {
	req := corev1.NodeSelectorRequirement{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpIn,
		Values: strings.Split(products(r), ",")}
	if r.IntN(4) == 0 {
		req.Operator = corev1.NodeSelectorOpNotIn
	}
	terms := []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}}
	if r.IntN(4) == 0 {
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}})
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
}

// setTypeMeta sets the apiVersion and kind of an object New built, so
// that it can be sent as JSON on its own.
func setTypeMeta(obj client.Object, kind string) {
	apiVersion := map[string]string{"Pod": "v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1", "CronJob": "batch/v1"}[kind]
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
}
