package integration_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// forgedRecord claims, as modelgate's, three parts a user wrote: trusted,
// it would make modelgate delete them.
var forgedRecord = mutators.Record{
	Mutators: []string{mutators.OwnerMetadataName, "model-loader", "gpu-placement", "serving-probes"},
	Settings: "000000000000",
	Owns:     []string{"limits/server/memory=1Gi", "requests/server/cpu=500m", "nodeAffinity/In/tenant.example.com/pool"},
}.String()

var _ = Describe("Forged reserved metadata", func() {
	var (
		ctx  context.Context
		user client.Client
		ns   string
	)
	BeforeEach(func() {
		ctx = context.Background()
		user = authenticated("mallory", "system:masters")
		ns = namespace(ctx, map[string]string{annotations.NamespaceTeam: "vision"})
	})

	// pinnedPod is a vLLM Pod whose container "server" sets a memory limit
	// and a CPU request, pinned to a tenant's node pool.
	pinnedPod := func(name string, a map[string]string) *corev1.Pod {
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: name, Annotations: a}).(*corev1.Pod)
		for i := range pod.Spec.Containers {
			if c := &pod.Spec.Containers[i]; c.Name == "server" {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
				c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
			}
		}
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "tenant.example.com/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
			}}},
		}}
		return pod
	}
	server := func(pod *corev1.Pod) corev1.Container {
		GinkgoHelper()
		for _, c := range pod.Spec.Containers {
			if c.Name == "server" {
				return c
			}
		}
		Fail("no container server")
		return corev1.Container{}
	}

	It("keeps every field a forged injection record claims, and replaces the record with a sealed one", func() {
		a := vllmAnnotations(hfModel)
		a[annotations.Container] = "server"
		a[annotations.Injected] = forgedRecord
		a[annotations.Seal] = "v1.AAAAAAAAAAAAAAAAAAAAAA"
		pod := pinnedPod("forged-record", a)
		Expect(user.Create(ctx, pod)).To(Succeed())

		c := server(pod)
		Expect(c.Resources.Limits.Memory().String()).To(Equal("1Gi"))
		Expect(c.Resources.Requests.Cpu().String()).To(Equal("500m"))
		Expect(pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions).
			To(ContainElement(HaveField("Key", "tenant.example.com/pool")))
		Expect(pod.Spec.InitContainers).To(ContainElement(HaveField("Name", mutators.LoaderContainerName)))

		rec, ok := mutators.ParseRecord(pod.Annotations[annotations.Injected])
		Expect(ok).To(BeTrue())
		Expect(rec.Owns).NotTo(ContainElements("limits/server/memory=1Gi", "requests/server/cpu=500m"))
		Expect(pod.Annotations[annotations.Seal]).NotTo(Equal("v1.AAAAAAAAAAAAAAAAAAAAAA"))
		Expect(pod.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, "mallory"))
	})

	// A user with the edit role can create a ReplicaSet, which modelgate
	// does not admit, and the ReplicaSet controller (a trusted requester)
	// creates its Pods: the template's made-up owner and record must not
	// pass through it.
	It("gives a Pod copied from a template modelgate never sealed no forged owner, and injects it", func() {
		a := vllmAnnotations(hfModel)
		a[annotations.Container] = "server"
		a[annotations.Injected] = forgedRecord
		a[annotations.OwnerFull] = "ceo@example.com"
		labels := map[string]string{"app": "llm", annotations.OwnerLabel: "ceo", annotations.TeamLabel: "finance"}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"},
			Spec: appsv1.ReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: a},
					Spec:       *builders.New("Pod", builders.Options{}).(*corev1.Pod).Spec.DeepCopy(),
				},
			},
		}
		Expect(user.Create(ctx, rs)).To(Succeed())

		controller := impersonating("system:serviceaccount:kube-system:replicaset-controller", "system:masters")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged-abc12",
				Labels: rs.Spec.Template.Labels, Annotations: rs.Spec.Template.Annotations},
			Spec: rs.Spec.Template.Spec,
		}
		Expect(controller.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).NotTo(HaveKey(annotations.OwnerLabel))
		Expect(pod.Annotations).NotTo(HaveKey(annotations.OwnerFull))
		Expect(pod.Labels).To(HaveKeyWithValue(annotations.TeamLabel, "vision"))
		// Not taken for a Pod stamped from an injected template: injected.
		Expect(pod.Spec.InitContainers).To(ContainElement(HaveField("Name", mutators.LoaderContainerName)))
	})

	It("takes a forged owner off a Pod a controller copies from a template that did not opt in", func() {
		labels := map[string]string{"app": "plain", annotations.OwnerLabel: "ceo", annotations.TeamLabel: "finance"}
		controller := impersonating("system:serviceaccount:kube-system:replicaset-controller", "system:masters")
		pod := builders.New("Pod", builders.Options{Namespace: ns, Name: "plain-abc12", Labels: labels,
			Annotations: map[string]string{annotations.Injected: "yes", "keep": "me"}}).(*corev1.Pod)
		Expect(controller.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(Equal(map[string]string{"app": "plain"}))
		Expect(pod.Annotations).To(Equal(map[string]string{"keep": "me"}))
	})

	It("keeps the owner a controller copies from a template modelgate sealed", func() {
		alice := authenticated(aliceName, "system:masters")
		dep := builders.New("Deployment", builders.Options{Namespace: ns, Name: "sealed", TemplateAnnotations: vllmAnnotations(hfModel)})
		Expect(alice.Create(ctx, dep)).To(Succeed())
		tpl := builders.PodTemplateMeta(dep)
		Expect(tpl.Annotations).To(HaveKey(annotations.Seal))

		controller := impersonating("system:serviceaccount:kube-system:replicaset-controller", "system:masters")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sealed-abc12", Labels: tpl.Labels, Annotations: tpl.Annotations},
			Spec:       dep.(*appsv1.Deployment).Spec.Template.Spec,
		}
		Expect(controller.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, tpl.Labels[annotations.OwnerLabel]))
		Expect(pod.Annotations).To(Equal(tpl.Annotations))

		// The seal is made with the key modelgate keeps in its Secret.
		var s corev1.Secret
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: webhook.RecordKeySecret}, &s)).To(Succeed())
		key, err := seal.New(s.Data[webhook.RecordKeyField])
		Expect(err).NotTo(HaveOccurred())
		Expect(key.Verify(ns, tpl)).To(BeTrue())
	})

	// Upgrading from a version without seals: a ReplicaSet's template that
	// version injected carries modelgate's parts and an unsealed record.
	It("admits a Pod copied from a template an older version injected, without a second loader", func() {
		alice := authenticated(aliceName, "system:masters")
		dep := builders.New("Deployment", builders.Options{Namespace: ns, Name: "legacy", TemplateAnnotations: vllmAnnotations(hfModel)})
		Expect(alice.Create(ctx, dep)).To(Succeed())
		tpl := builders.PodTemplateMeta(dep).DeepCopy()
		delete(tpl.Annotations, annotations.Seal)

		controller := impersonating("system:serviceaccount:kube-system:replicaset-controller", "system:masters")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy-abc12", Labels: tpl.Labels, Annotations: tpl.Annotations},
			Spec:       *dep.(*appsv1.Deployment).Spec.Template.Spec.DeepCopy(),
		}
		Expect(controller.Create(ctx, pod)).To(Succeed())
		loaders := 0
		for _, c := range pod.Spec.InitContainers {
			if c.Name == mutators.LoaderContainerName {
				loaders++
			}
		}
		Expect(loaders).To(Equal(1))
		Expect(pod.Annotations).To(HaveKey(annotations.Seal))
		Expect(pod.Labels).NotTo(HaveKey(annotations.OwnerLabel), "an unsealed owner is not passed on")
	})

	It("refuses a hand-written injection record on an object that did not opt in", func() {
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "record",
			Annotations: map[string]string{annotations.Injected: "yes"}})
		err := user.Create(ctx, obj)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("[reserved-metadata] metadata.annotations[modelgate.io/injected]"))
	})
})
