package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

var _ = Describe("Opting out and removing annotations", func() {
	var (
		ctx   context.Context
		alice client.Client
		ns    string
	)
	BeforeEach(func() {
		ctx = context.Background()
		alice = authenticated(aliceName, "system:masters")
		ns = namespace(ctx, nil)
	})

	// deployment creates a Deployment with the annotations on its template
	// and returns it as the API server stored it.
	deployment := func(name string, a map[string]string) *appsv1.Deployment {
		GinkgoHelper()
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: name, TemplateAnnotations: a})
		Expect(alice.Create(ctx, obj)).To(Succeed())
		return obj.(*appsv1.Deployment)
	}
	// untouched is the pod spec the API server stores for the same
	// Deployment when modelgate is not involved: the defaults, nothing else.
	untouched := func() *corev1.PodSpec {
		GinkgoHelper()
		a := vllmAnnotations(hfModel)
		a[annotations.Inject] = "false"
		return &deployment("baseline", a).Spec.Template.Spec
	}
	// updateTemplateAnnotations removes keys from the template's
	// annotations with a plain update, as kubectl edit does: every field
	// modelgate injected is still in the object sent.
	updateTemplateAnnotations := func(dep *appsv1.Deployment, remove ...string) {
		GinkgoHelper()
		for _, k := range remove {
			delete(dep.Spec.Template.Annotations, k)
		}
		Expect(alice.Update(ctx, dep)).To(Succeed())
	}

	It("takes out everything it injected when the workload opts out, and keeps the owner", func() {
		want := untouched()
		dep := deployment("opt-out", vllmAnnotations(hfModel))
		expectVLLMInjection(&dep.Spec.Template.Spec, hfModel)
		owner := dep.Labels[annotations.OwnerLabel]
		Expect(owner).NotTo(BeEmpty())

		reverted := outcomeCount("Deployment", "reverted")
		updateTemplateAnnotations(dep, annotations.Inject)
		Expect(outcomeCount("Deployment", "reverted")).To(Equal(reverted + 1))

		got := &dep.Spec.Template.Spec
		Expect(equality.Semantic.DeepEqual(want, got)).To(BeTrue(),
			"the pod spec is the user's again:\nwant %+v\ngot  %+v", want, got)
		for _, m := range []map[string]string{dep.Annotations, dep.Spec.Template.Annotations} {
			Expect(m).NotTo(HaveKey(annotations.Injected))
		}
		Expect(dep.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, owner), "owner metadata records who made it")
		Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, owner))

		By("a later update of the opted-out workload changes nothing")
		dep.Spec.Template.Annotations["note"] = "scaled by hand"
		before := outcomeCount("Deployment", "reverted")
		Expect(alice.Update(ctx, dep)).To(Succeed())
		Expect(equality.Semantic.DeepEqual(want, &dep.Spec.Template.Spec)).To(BeTrue())
		Expect(outcomeCount("Deployment", "reverted")).To(Equal(before))
	})

	It("removes the probes and port when the engine annotation goes, and adds fresh ones when it comes back", func() {
		dep := deployment("engine", vllmAnnotations(hfModel))
		updateTemplateAnnotations(dep, annotations.Engine)
		server := dep.Spec.Template.Spec.Containers[0]
		Expect(server.ReadinessProbe).To(BeNil())
		Expect(server.StartupProbe).To(BeNil())
		Expect(server.Ports).To(BeEmpty())
		Expect(initContainerNames(&dep.Spec.Template.Spec)).To(Equal([]string{"model-loader"}), "the model stays")

		dep.Spec.Template.Annotations[annotations.Engine] = "vllm"
		dep.Spec.Template.Annotations[annotations.Port] = "9000"
		Expect(alice.Update(ctx, dep)).To(Succeed())
		server = dep.Spec.Template.Spec.Containers[0]
		Expect(server.ReadinessProbe).NotTo(BeNil())
		Expect(server.ReadinessProbe.HTTPGet.Port.IntValue()).To(Equal(9000))
		Expect(server.StartupProbe.HTTPGet.Port.IntValue()).To(Equal(9000))
		Expect(server.Ports).To(ConsistOf(HaveField("ContainerPort", int32(9000))))
	})

	It("removes the GPU limits, affinity and toleration when the GPU annotations go, keeping the user's", func() {
		a := vllmAnnotations(hfModel)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "gpu", TemplateAnnotations: a})
		spec := builders.PodSpecOf(obj)
		zone := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu-west-1a"}}
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}}}}}
		Expect(alice.Create(ctx, obj)).To(Succeed())
		dep := obj.(*appsv1.Deployment)

		updateTemplateAnnotations(dep, annotations.GPU, annotations.GPUProduct)
		got := &dep.Spec.Template.Spec
		Expect(got.Containers[0].Resources.Limits).NotTo(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
		Expect(got.Containers[0].Resources.Requests).NotTo(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
		Expect(got.Tolerations).To(BeEmpty())
		Expect(got.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(Equal(
			[]corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{zone}}}), "the user's term stays as written")
		Expect(got.Containers[0].ReadinessProbe).NotTo(BeNil(), "the engine stays")
	})

	It("takes out what it injected when the namespace's opt-in label goes", func() {
		// The API server's namespaceSelectors and modelgate's namespace
		// cache see the label a moment later: labelNamespace waits for both.
		labelNamespace(ctx, ns, func(l map[string]string) { l[annotations.NamespaceInjection] = annotations.InjectionEnabled })
		a := vllmAnnotations(hfModel)
		delete(a, annotations.Inject)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "ns-opt-in", TemplateAnnotations: a})
		Expect(alice.Create(ctx, obj)).To(Succeed())
		dep := obj.(*appsv1.Deployment)
		Expect(initContainerNames(&dep.Spec.Template.Spec)).To(Equal([]string{"model-loader"}))

		labelNamespace(ctx, ns, func(l map[string]string) { delete(l, annotations.NamespaceInjection) })
		dep.Spec.Template.Annotations["touched"] = "yes"
		Expect(alice.Update(ctx, dep)).To(Succeed())
		Expect(dep.Spec.Template.Spec.InitContainers).To(BeEmpty())
		Expect(dep.Spec.Template.Spec.Volumes).To(BeEmpty())
		Expect(dep.Spec.Template.Annotations).NotTo(HaveKey(annotations.Injected))
	})
})
