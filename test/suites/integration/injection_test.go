package integration_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

const (
	aliceName  = "alice@example.com"
	aliceLabel = "alice_example.com"
)

var optIn = map[string]string{annotations.Inject: "true"}

var _ = Describe("owner metadata injection", func() {
	var (
		ctx   context.Context
		alice client.Client
	)
	BeforeEach(func() {
		ctx = context.Background()
		alice = authenticated(aliceName, "system:masters")
	})

	expectOwned := func(obj client.Object, owner, full, team string) {
		GinkgoHelper()
		metas := []metav1.Object{obj, builders.PodTemplateMeta(obj)}
		for _, m := range metas {
			Expect(m.GetLabels()).To(HaveKeyWithValue(annotations.OwnerLabel, owner))
			if full == "" {
				Expect(m.GetAnnotations()).NotTo(HaveKey(annotations.OwnerFull))
			} else {
				Expect(m.GetAnnotations()).To(HaveKeyWithValue(annotations.OwnerFull, full))
			}
			if team == "" {
				Expect(m.GetLabels()).NotTo(HaveKey(annotations.TeamLabel))
			} else {
				Expect(m.GetLabels()).To(HaveKeyWithValue(annotations.TeamLabel, team))
			}
			rec, ok := mutators.ParseRecord(m.GetAnnotations()[annotations.Injected])
			Expect(ok).To(BeTrue(), "injected record on %s", m.GetName())
			Expect(rec.Mutators).To(Equal([]string{mutators.OwnerMetadataName}))
			Expect(rec.Settings).NotTo(BeEmpty())
		}
	}

	for _, kind := range builders.Kinds {
		It(fmt.Sprintf("stamps an opted-in %s and its pod template with the requester and team", kind), func() {
			ns := namespace(ctx, map[string]string{annotations.NamespaceTeam: "vision"})
			obj := builders.New(kind, builders.Options{Namespace: ns, Name: "llm", Annotations: optIn})
			Expect(alice.Create(ctx, obj)).To(Succeed())
			// The object returned by the API server is the stored one.
			expectOwned(obj, aliceLabel, aliceName, "vision")
		})
	}

	It("takes the opt-in from the pod template as well as the workload", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", TemplateAnnotations: optIn})
		Expect(alice.Create(ctx, obj)).To(Succeed())
		expectOwned(obj, aliceLabel, aliceName, "")
	})

	It("names a service account sa.<namespace>.<name>", func() {
		ns := namespace(ctx, nil)
		deployer := impersonating("system:serviceaccount:ci:deployer", "system:masters")
		obj := builders.New("Job", builders.Options{Namespace: ns, Name: "train", Annotations: optIn})
		Expect(deployer.Create(ctx, obj)).To(Succeed())
		expectOwned(obj, "sa.ci.deployer", "system:serviceaccount:ci:deployer", "")
	})

	for _, kind := range builders.Kinds {
		It(fmt.Sprintf("never calls modelgate for a %s that did not opt in, and leaves it untouched", kind), func() {
			ns := namespace(ctx, map[string]string{annotations.NamespaceTeam: "vision"})
			before := reviewCount(kind)
			obj := builders.New(kind, builders.Options{Namespace: ns, Name: "plain"})
			Expect(alice.Create(ctx, obj)).To(Succeed())
			Expect(reservedKeys(obj)).To(BeEmpty())
			Expect(reservedKeys(builders.PodTemplateMeta(obj))).To(BeEmpty())
			Expect(reviewCount(kind)).To(Equal(before), "the API server must filter it out")
		})
	}

	DescribeTable("leaves excluded namespaces alone, opt-in or not",
		func(nsName string, labels map[string]string) {
			if nsName == "" {
				nsName = namespace(ctx, labels)
			}
			before := reviewCount("Deployment")
			obj := builders.New("Deployment", builders.Options{Namespace: nsName, Name: uniqueName("excluded"), Annotations: optIn})
			Expect(alice.Create(ctx, obj)).To(Succeed())
			DeferCleanup(func() { Expect(admin.Delete(context.Background(), obj)).To(Succeed()) })
			Expect(reservedKeys(obj)).To(BeEmpty())
			Expect(reviewCount("Deployment")).To(Equal(before))
		},
		Entry("kube-system", "kube-system", nil),
		Entry("kube-public", "kube-public", nil),
		Entry("a namespace labelled modelgate.io/ignore", "", map[string]string{annotations.NamespaceIgnore: "true"}),
		Entry("an enabled namespace that is also ignored", "",
			map[string]string{annotations.NamespaceIgnore: "", annotations.NamespaceInjection: annotations.InjectionEnabled}),
	)

	Context("in a namespace labelled modelgate.io/injection=enabled", func() {
		var ns string
		BeforeEach(func() {
			ns = namespace(ctx, map[string]string{
				annotations.NamespaceInjection: annotations.InjectionEnabled,
				annotations.NamespaceTeam:      "nlp",
			})
		})

		It("injects objects without any annotation", func() {
			obj := builders.New("StatefulSet", builders.Options{Namespace: ns, Name: "db"})
			Expect(alice.Create(ctx, obj)).To(Succeed())
			expectOwned(obj, aliceLabel, aliceName, "nlp")
		})

		It(`lets an object opt out with modelgate.io/inject: "false", without calling modelgate`, func() {
			before := reviewCount("Deployment")
			obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "out",
				TemplateAnnotations: map[string]string{annotations.Inject: "false"}})
			Expect(alice.Create(ctx, obj)).To(Succeed())
			Expect(reservedKeys(obj)).To(BeEmpty())
			Expect(reservedKeys(builders.PodTemplateMeta(obj))).To(BeEmpty())
			Expect(reviewCount("Deployment")).To(Equal(before))
		})
	})

	It("keeps the original owner when another user updates the workload", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", Annotations: optIn})
		Expect(alice.Create(ctx, obj)).To(Succeed())

		bob := authenticated("bob", "system:masters")
		dep := &appsv1.Deployment{}
		Expect(bob.Get(ctx, client.ObjectKeyFromObject(obj), dep)).To(Succeed())
		dep.Spec.Template.Spec.Containers[0].Image = "registry.example.com/llm/server:2.0"
		// Bob also tries to take ownership by hand, on the object and the template.
		dep.Labels[annotations.OwnerLabel] = "bob"
		delete(dep.Spec.Template.Labels, annotations.OwnerLabel)
		Expect(bob.Update(ctx, dep)).To(Succeed())

		Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example.com/llm/server:2.0"))
		expectOwned(dep, aliceLabel, aliceName, "")
	})

	It("restores the owner when someone relabels an injected Pod", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Pod", builders.Options{Namespace: ns, Name: "relabel", Annotations: optIn})
		Expect(alice.Create(ctx, obj)).To(Succeed())

		bob := authenticated("bob", "system:masters")
		pod := &corev1.Pod{}
		Expect(bob.Get(ctx, client.ObjectKeyFromObject(obj), pod)).To(Succeed())
		pod.Labels[annotations.OwnerLabel] = "bob"
		pod.Labels["tier"] = "gpu"
		Expect(bob.Update(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(HaveKeyWithValue("tier", "gpu"))
		Expect(pod.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, aliceLabel))
	})

	It("rejects a change to the owner of an object that has since opted out", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "opted-out", Annotations: optIn})
		Expect(alice.Create(ctx, obj)).To(Succeed())

		dep := obj.(*appsv1.Deployment)
		dep.Annotations[annotations.Inject] = "false"
		Expect(alice.Update(ctx, dep)).To(Succeed(), "opting out keeps the metadata as it is")
		Expect(dep.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, aliceLabel))

		bob := authenticated("bob", "system:masters")
		dep.Labels[annotations.OwnerLabel] = "bob"
		err := bob.Update(ctx, dep)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`[reserved-metadata] metadata.labels[modelgate.io/owner]: Forbidden: is set by modelgate and cannot be changed (was "alice_example.com")`))
	})

	It("overwrites an owner forged at creation with the real requester", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Pod", builders.Options{Namespace: ns, Name: "forged", Annotations: optIn,
			Labels: map[string]string{annotations.OwnerLabel: "somebody-else", annotations.TeamLabel: "admins"}})
		Expect(alice.Create(ctx, obj)).To(Succeed())
		expectOwned(obj, aliceLabel, aliceName, "")
	})

	It("rejects an owner forged on an object that did not opt in", func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "forged",
			TemplateLabels: map[string]string{annotations.OwnerLabel: "somebody-else"}})
		err := alice.Create(ctx, obj)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("[reserved-metadata] spec.template.metadata.labels[modelgate.io/owner]"))
	})

	It("changes nothing when the same object is applied twice", func() {
		ns := namespace(ctx, map[string]string{annotations.NamespaceTeam: "vision"})
		apply := func() *appsv1.Deployment {
			obj := builders.New("Deployment", builders.Options{Namespace: ns, Name: "applied", Annotations: optIn})
			obj.GetObjectKind().SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
			Expect(alice.Patch(ctx, obj, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)).To(Succeed()) //nolint:staticcheck // server-side apply as kubectl does it.
			return obj.(*appsv1.Deployment)
		}
		first := apply()
		expectOwned(first, aliceLabel, aliceName, "vision")
		second := apply()
		Expect(second.ResourceVersion).To(Equal(first.ResourceVersion))
		Expect(second.Generation).To(Equal(first.Generation))

		// A plain update that sends the object back unchanged is a no-op too.
		got := &appsv1.Deployment{}
		Expect(alice.Get(ctx, client.ObjectKeyFromObject(first), got)).To(Succeed())
		Expect(alice.Update(ctx, got)).To(Succeed())
		Expect(got.ResourceVersion).To(Equal(first.ResourceVersion))
	})

	It("changes nothing on a Pod that a controller creates from an injected template", func() {
		ns := namespace(ctx, map[string]string{annotations.NamespaceTeam: "vision"})
		dep := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", Annotations: optIn})
		Expect(alice.Create(ctx, dep)).To(Succeed())
		tpl := builders.PodTemplateMeta(dep)

		// What the ReplicaSet controller does: a Pod from the template, sent
		// with the controller's own identity.
		rs := impersonating("system:serviceaccount:kube-system:replicaset-controller", "system:masters")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm-abc12",
				Labels: tpl.Labels, Annotations: tpl.Annotations},
			Spec: dep.(*appsv1.Deployment).Spec.Template.Spec,
		}
		Expect(rs.Create(ctx, pod)).To(Succeed())
		Expect(pod.Labels).To(Equal(tpl.Labels))
		Expect(pod.Annotations).To(Equal(tpl.Annotations))
	})

	It(`rejects modelgate.io/inject: "maybe", naming the annotation, the value and what is accepted`, func() {
		ns := namespace(ctx, nil)
		obj := builders.New("Job", builders.Options{Namespace: ns, Name: "maybe",
			TemplateAnnotations: map[string]string{annotations.Inject: "maybe"}})
		err := alice.Create(ctx, obj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.template.metadata.annotations[modelgate.io/inject]: Unsupported value: "maybe": supported values: "true", "false"`))
	})
})
