package integration_test

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

const (
	hfModel = "hf://meta-llama/Llama-3.1-8B-Instruct"
	h100    = "NVIDIA-H100-80GB-HBM3"
	a100    = "NVIDIA-A100-SXM4-80GB"
)

// vllmAnnotations are what an application team writes for a vLLM server.
func vllmAnnotations(model string) map[string]string {
	return map[string]string{
		annotations.Inject:        "true",
		annotations.Model:         model,
		annotations.ModelSize:     "20Gi",
		annotations.GPU:           "1",
		annotations.GPUProduct:    a100 + "," + h100,
		annotations.Engine:        "vllm",
		annotations.WarmupTimeout: "600",
	}
}

func initContainerNames(spec *corev1.PodSpec) []string {
	out := make([]string, len(spec.InitContainers))
	for i, c := range spec.InitContainers {
		out[i] = c.Name
	}
	return out
}

// expectVLLMInjection checks everything a vLLM server on an A100/H100 needs.
func expectVLLMInjection(spec *corev1.PodSpec, model string) {
	GinkgoHelper()
	Expect(spec.InitContainers).NotTo(BeEmpty())
	loader := spec.InitContainers[0]
	Expect(loader.Name).To(Equal("model-loader"))
	Expect(loader.Args).To(ContainElements("--uri="+model, "--dest=/models"))
	Expect(loader.VolumeMounts).To(ContainElement(HaveField("Name", "model-store")))

	var vol *corev1.Volume
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == "model-store" {
			vol = &spec.Volumes[i]
		}
	}
	Expect(vol).NotTo(BeNil())
	Expect(vol.EmptyDir).NotTo(BeNil())
	Expect(vol.EmptyDir.SizeLimit.Cmp(resource.MustParse("20Gi"))).To(Equal(0))

	server := spec.Containers[0]
	Expect(server.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "model-store", MountPath: "/models", ReadOnly: true}))
	Expect(server.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), resource.MustParse("1")))
	Expect(server.Resources.Requests).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), resource.MustParse("1")))
	Expect(server.EnvFrom).To(BeEmpty(), "credentials never reach the serving container")
	if strings.HasPrefix(model, "hf://") {
		// The engine reads the loader's Hugging Face cache, offline, under
		// either name of its variable (TGI reads the older one).
		Expect(server.Env).To(ConsistOf(
			corev1.EnvVar{Name: "HF_HUB_CACHE", Value: "/models/.cache/huggingface/hub"},
			corev1.EnvVar{Name: "HUGGINGFACE_HUB_CACHE", Value: "/models/.cache/huggingface/hub"},
			corev1.EnvVar{Name: "HF_HUB_OFFLINE", Value: "1"}))
	} else {
		Expect(server.Env).To(BeEmpty(), "loader settings never reach the serving container")
	}

	Expect(spec.Affinity).NotTo(BeNil())
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	Expect(terms).NotTo(BeEmpty())
	for _, t := range terms {
		Expect(t.MatchExpressions).To(ContainElement(corev1.NodeSelectorRequirement{
			Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpIn, Values: []string{a100, h100}}))
	}
	Expect(spec.Tolerations).To(ContainElement(SatisfyAll(
		HaveField("Key", "nvidia.com/gpu"), HaveField("Operator", corev1.TolerationOpExists))))

	Expect(server.ReadinessProbe).NotTo(BeNil())
	Expect(server.ReadinessProbe.HTTPGet.Path).To(Equal("/health"))
	Expect(server.ReadinessProbe.HTTPGet.Port.IntValue()).To(Equal(8000))
	Expect(server.StartupProbe).NotTo(BeNil())
	budget := server.StartupProbe.PeriodSeconds * server.StartupProbe.FailureThreshold
	Expect(budget).To(BeNumerically(">=", 600), "the startup probe covers the warm-up timeout")
}

var _ = Describe("GPU workload injection", func() {
	var (
		ctx   context.Context
		alice client.Client
	)
	BeforeEach(func() {
		ctx = context.Background()
		alice = authenticated(aliceName, "system:masters")
	})

	for _, kind := range builders.Kinds {
		It(fmt.Sprintf("gives an annotated vLLM %s its loader, GPU placement and probes, and the API server accepts it", kind), func() {
			ns := namespace(ctx, nil)
			obj := builders.New(kind, builders.Options{Namespace: ns, Name: "llm", TemplateAnnotations: vllmAnnotations(hfModel)})
			Expect(alice.Create(ctx, obj)).To(Succeed())
			expectVLLMInjection(builders.PodSpecOf(obj), hfModel)
		})
	}

	It("ANDs the GPU requirement into an existing node affinity and keeps the rest", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "affinity", TemplateAnnotations: vllmAnnotations(hfModel)})
		spec := builders.PodSpecOf(obj)
		zone := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a"}}
		pool := corev1.NodeSelectorRequirement{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"reserved"}}
		preferred := corev1.PreferredSchedulingTerm{Weight: 10, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "spot", Operator: corev1.NodeSelectorOpDoesNotExist}}}}
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{zone}},
				{MatchExpressions: []corev1.NodeSelectorRequirement{pool}},
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{preferred},
		}}
		Expect(alice.Create(ctx, obj)).To(Succeed())

		got := builders.PodSpecOf(obj).Affinity.NodeAffinity
		terms := got.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		Expect(terms).To(HaveLen(2), "terms are ORed: the GPU requirement goes into each, not a new one")
		Expect(terms[0].MatchExpressions).To(ContainElement(zone))
		Expect(terms[1].MatchExpressions).To(ContainElement(pool))
		Expect(got.PreferredDuringSchedulingIgnoredDuringExecution).To(Equal([]corev1.PreferredSchedulingTerm{preferred}))
		expectVLLMInjection(builders.PodSpecOf(obj), hfModel)
	})

	It("keeps a model-loader init container the user wrote, and still wires the volume", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "own-loader", TemplateAnnotations: vllmAnnotations(hfModel)})
		mine := corev1.Container{Name: "model-loader", Image: "registry.example.com/our/loader:7",
			Args:         []string{"fetch", "everything"},
			VolumeMounts: []corev1.VolumeMount{{Name: "model-store", MountPath: "/models"}}}
		builders.PodSpecOf(obj).InitContainers = []corev1.Container{mine}
		Expect(alice.Create(ctx, obj)).To(Succeed())
		spec := builders.PodSpecOf(obj)
		Expect(initContainerNames(spec)).To(Equal([]string{"model-loader"}))
		Expect(spec.InitContainers[0].Image).To(Equal(mine.Image))
		Expect(spec.InitContainers[0].Args).To(Equal(mine.Args))
		Expect(spec.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "model-store", MountPath: "/models", ReadOnly: true}))
		Expect(spec.Volumes).To(ContainElement(HaveField("Name", "model-store")))
	})

	It("changes nothing when the injected workload is applied again", func() {
		ns := namespace(ctx, nil)
		apply := func() *appsv1.Deployment {
			obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "again", TemplateAnnotations: vllmAnnotations(hfModel)})
			obj.GetObjectKind().SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
			Expect(alice.Patch(ctx, obj, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)).To(Succeed()) //nolint:staticcheck // server-side apply as kubectl does it.
			return obj.(*appsv1.Deployment)
		}
		first := apply()
		expectVLLMInjection(&first.Spec.Template.Spec, hfModel)
		injected := outcomeCount("Deployment", "injected")
		second := apply()
		Expect(second.ResourceVersion).To(Equal(first.ResourceVersion))
		Expect(second.Generation).To(Equal(first.Generation))
		Expect(outcomeCount("Deployment", "injected")).To(Equal(injected), "the second pass must answer with no patch")
	})

	It("replaces the loader when the model URI changes, rather than adding a second", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "new-model", TemplateAnnotations: vllmAnnotations(hfModel)})
		Expect(alice.Create(ctx, obj)).To(Succeed())
		dep := obj.(*appsv1.Deployment)
		const s3Model = "s3://models/llama-3.1-8b-instruct"
		dep.Spec.Template.Annotations[annotations.Model] = s3Model
		Expect(alice.Update(ctx, dep)).To(Succeed())

		spec := &dep.Spec.Template.Spec
		Expect(initContainerNames(spec)).To(Equal([]string{"model-loader"}))
		expectVLLMInjection(spec, s3Model)
		mounts := 0
		for _, m := range spec.Containers[0].VolumeMounts {
			if m.Name == "model-store" {
				mounts++
			}
		}
		Expect(mounts).To(Equal(1))
	})

	It("denies a malformed annotation, naming it, the value and what is accepted, and changes nothing", func() {
		ns := namespace(ctx, nil)
		a := vllmAnnotations("ftp://models.example.com/llama")
		a[annotations.GPU] = "two"
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "bad", TemplateAnnotations: a})
		err := alice.Create(ctx, obj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		msg := err.Error()
		Expect(msg).To(ContainSubstring(`spec.template.metadata.annotations[modelgate.io/model]`))
		Expect(msg).To(ContainSubstring(`unsupported scheme "ftp" (supported: s3, gs, hf, pvc, https, oci)`))
		Expect(msg).To(ContainSubstring(`spec.template.metadata.annotations[modelgate.io/gpu]`), "every problem is listed at once")
		Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(obj), &appsv1.Deployment{}))).To(BeTrue())
	})

	It("leaves a workload with the same annotations but no opt-in untouched", func() {
		ns := namespace(ctx, nil)
		a := vllmAnnotations(hfModel)
		delete(a, annotations.Inject)
		before := reviewCount("Deployment")
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "not-opted-in", TemplateAnnotations: a})
		Expect(alice.Create(ctx, obj)).To(Succeed())
		spec := builders.PodSpecOf(obj)
		Expect(spec.InitContainers).To(BeEmpty())
		Expect(spec.Volumes).To(BeEmpty())
		Expect(spec.Affinity).To(BeNil())
		Expect(spec.Containers[0].Resources.Limits).To(BeEmpty())
		Expect(reviewCount("Deployment")).To(Equal(before))
	})

	It("names the containers when it cannot tell which one serves the model", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "two", TemplateAnnotations: vllmAnnotations(hfModel)})
		spec := builders.PodSpecOf(obj)
		spec.Containers = append(spec.Containers, corev1.Container{Name: "sidecar", Image: "envoyproxy/envoy:v1.31"})
		err := alice.Create(ctx, obj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("modelgate.io/container"))
		Expect(err.Error()).To(ContainSubstring("server, sidecar"))
	})

	It("does not inject a second time into a Pod a controller stamps from an injected template", func() {
		ns := namespace(ctx, nil)
		dep := builders.New("Deployment", builders.Options{Namespace: ns, Name: "stamp", TemplateAnnotations: vllmAnnotations(hfModel)})
		Expect(alice.Create(ctx, dep)).To(Succeed())
		tpl := dep.(*appsv1.Deployment).Spec.Template
		rs := impersonating("system:serviceaccount:kube-system:replicaset-controller", "system:masters")
		pod := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy()}
		pod.Namespace, pod.Name = ns, "stamp-abc12"
		Expect(rs.Create(ctx, pod)).To(Succeed())
		Expect(initContainerNames(&pod.Spec)).To(Equal([]string{"model-loader"}))
		Expect(pod.Spec.Containers[0].VolumeMounts).To(HaveLen(len(tpl.Spec.Containers[0].VolumeMounts)))
		Expect(strings.Count(fmt.Sprint(pod.Spec.Tolerations), "nvidia.com/gpu")).To(Equal(1))
		Expect(pod.Labels).To(Equal(tpl.Labels))
	})
})
