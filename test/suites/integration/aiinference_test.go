package integration_test

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	servingv1alpha1 "github.com/modelgate/modelgate/api/v1alpha1"
	servingv1beta1 "github.com/modelgate/modelgate/api/v1beta1"
	"github.com/modelgate/modelgate/migrate"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

const (
	aiinferenceCRD = "aiinferences.serving.modelgate.io"
	llamaRevision  = "0e9e39f249a16976918f6564b8830bc894c89659"
)

var _ = Describe("AIInference in three versions", Ordered, func() {
	var (
		ctx  context.Context
		ns   string
		c    client.Client
		warn *env.Warnings
	)
	BeforeAll(func() {
		ctx = context.Background()
		ns = namespace(ctx, map[string]string{annotations.NamespaceTeam: "nlp"})
		s, err := env.Scheme()
		Expect(err).NotTo(HaveOccurred())
		cfg := rest.CopyConfig(adminCfg)
		warn = &env.Warnings{}
		cfg.WarningHandlerWithContext = warn
		c, err = client.New(cfg, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
	})

	key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

	It("warns that the triton preset cannot serve a model modelgate's loader fetches, and not for a claim", func() {
		triton := func(name, uri string) *servingv1.AIInference {
			return &servingv1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: servingv1.AIInferenceSpec{
					Model:  servingv1.ModelSpec{URI: uri},
					Engine: servingv1.EngineSpec{Name: servingv1.EngineTriton},
				},
			}
		}
		warn.Take()
		Expect(c.Create(ctx, triton("triton-s3", "s3://models/triton"), client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).To(ContainElement(And(HavePrefix("[modelgate] spec.engine.name triton:"),
			ContainSubstring("loader keeps its state (.modelgate) beside the model"), ContainSubstring("pvc://<claim>"))))
		Expect(c.Create(ctx, triton("triton-claim", "pvc://triton-repository"), client.DryRunAll)).To(Succeed())
		Expect(warn.Take()).NotTo(ContainElement(ContainSubstring("spec.engine.name triton")))
	})

	It("creates a v1alpha1 object, defaults it and reads it as v1 and v1beta1", func() {
		alpha := &servingv1alpha1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-alpha"},
			Spec: servingv1alpha1.AIInferenceSpec{
				ModelSource: "hf://meta-llama/Llama-3.1-8B-Instruct@" + llamaRevision,
				GPU:         &servingv1alpha1.GPU{ProductLabel: "NVIDIA-A100-SXM4-80GB"},
			},
		}
		warn.Take()
		Expect(c.Create(ctx, alpha)).To(Succeed())
		Expect(warn.Take()).To(ContainElement(And(ContainSubstring("v1alpha1"), ContainSubstring("deprecated"),
			ContainSubstring("serving.modelgate.io/v1"))), "kubectl shows the CRD's deprecation warning")

		v1obj := &servingv1.AIInference{}
		Expect(c.Get(ctx, key("llama-alpha"), v1obj)).To(Succeed())
		Expect(v1obj.Spec).To(Equal(servingv1.AIInferenceSpec{
			Model:    servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: llamaRevision},
			Engine:   servingv1.EngineSpec{Name: servingv1.EngineVLLM, Port: 8000},
			GPU:      &servingv1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB"}, Count: 1},
			Replicas: ptr.To[int32](1),
			Warmup:   &servingv1.WarmupSpec{TimeoutSeconds: 300},
		}), "the revision moved out of the URI and the defaulter filled in engine, port, count, replicas and warm-up")
		Expect(v1obj.Annotations).NotTo(HaveKey(servingv1.ConversionDataAnnotation))
		Expect(v1obj.Labels).To(HaveKeyWithValue(annotations.TeamLabel, "nlp"), "the team comes from the namespace")
		Expect(v1obj.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, Not(BeEmpty())), "the owner is the requester")

		beta := &servingv1beta1.AIInference{}
		Expect(c.Get(ctx, key("llama-alpha"), beta)).To(Succeed())
		Expect(beta.Spec.Model).To(Equal(servingv1beta1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: llamaRevision}))
		Expect(beta.Spec.GPU.Products).To(Equal([]string{"NVIDIA-A100-SXM4-80GB"}))
		Expect(beta.Annotations).NotTo(HaveKey(servingv1.ConversionDataAnnotation), "v1beta1 says everything this object says")

		Expect(c.Get(ctx, key("llama-alpha"), alpha)).To(Succeed())
		Expect(alpha.Spec.ModelSource).To(Equal("hf://meta-llama/Llama-3.1-8B-Instruct@" + llamaRevision))
		Expect(alpha.Annotations).To(HaveKeyWithValue(servingv1.ConversionDataAnnotation, ContainSubstring(`"port":8000`)),
			"v1alpha1 has no place for the defaulted engine port: the annotation keeps it")

		By("changing the engine moves the defaulted port to the new engine's preset")
		Expect(c.Patch(ctx, v1obj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"engine":{"name":"tgi"}}}`)))).To(Succeed())
		Expect(v1obj.Spec.Engine).To(Equal(servingv1.EngineSpec{Name: servingv1.EngineTGI, Port: 80}))
	})

	It("keeps v1's second GPU product through a read and an update as v1alpha1", func() {
		obj := &servingv1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-products",
				Labels:      map[string]string{annotations.OwnerLabel: "mallory"},
				Annotations: map[string]string{servingv1.ConversionDataAnnotation: `{"replicas":99}`}},
			Spec: servingv1.AIInferenceSpec{
				Model:  servingv1.ModelSpec{URI: "s3://acme-ml-models/llama", CredentialsSecretRef: &servingv1.SecretReference{Name: "s3-creds"}},
				Engine: servingv1.EngineSpec{Name: servingv1.EngineSGLang, Env: []corev1.EnvVar{{Name: "HF_HUB_OFFLINE", Value: "1"}}},
				GPU: &servingv1.GPUSpec{Products: []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"},
					Count: 2, MinMemoryMiB: 40960},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Gi")}},
				Scheduling: &servingv1.SchedulingSpec{PriorityClassName: "inference",
					Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ml", Effect: corev1.TaintEffectNoSchedule}}},
			},
		}
		Expect(c.Create(ctx, obj)).To(Succeed())
		Expect(obj.Labels[annotations.OwnerLabel]).NotTo(Equal("mallory"), "a hand-written owner is replaced by the requester")
		Expect(obj.Annotations).NotTo(HaveKey(servingv1.ConversionDataAnnotation), "a v1 object is never stored with the annotation")
		want := obj.Spec.DeepCopy()

		alpha := &servingv1alpha1.AIInference{}
		Expect(c.Get(ctx, key("two-products"), alpha)).To(Succeed())
		Expect(alpha.Spec.GPU).To(Equal(&servingv1alpha1.GPU{ProductLabel: "NVIDIA-A100-SXM4-80GB", Count: 2}))
		Expect(alpha.Spec.Engine).To(Equal(servingv1alpha1.Engine("sglang")), "an engine v1alpha1 does not know reads as it is")
		Expect(alpha.Annotations).To(HaveKey(servingv1.ConversionDataAnnotation))

		By("updating replicas through v1alpha1 (the unchanged engine passes by validation ratcheting)")
		alpha.Spec.Replicas = ptr.To[int32](3)
		Expect(c.Update(ctx, alpha)).To(Succeed())

		Expect(c.Get(ctx, key("two-products"), obj)).To(Succeed())
		want.Replicas = ptr.To[int32](3)
		Expect(obj.Spec).To(Equal(*want), "everything v1alpha1 cannot show came back from the annotation")
		Expect(obj.Annotations).NotTo(HaveKey(servingv1.ConversionDataAnnotation), "the annotation never reaches the stored v1 object")
	})

	It("scales through the scale subresource in every version, as kubectl scale and an HPA do", func() {
		// A namespace of its own: the listing spec counts the others.
		own := namespace(ctx, nil)
		scaledKey := client.ObjectKey{Namespace: own, Name: "scaled"}
		obj := &servingv1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "scaled"},
			Spec: servingv1.AIInferenceSpec{Model: servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B-Instruct", Revision: llamaRevision},
				Replicas: ptr.To[int32](1)},
		}
		Expect(c.Create(ctx, obj)).To(Succeed())
		// The controller's status: the Deployment's Pod count and selector.
		obj.Status.Replicas = 1
		obj.Status.Selector = "serving.modelgate.io/inference=scaled"
		Expect(c.Status().Update(ctx, obj)).To(Succeed())

		scale := &autoscalingv1.Scale{}
		Expect(c.SubResource("scale").Get(ctx, obj, scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(Equal(int32(1)))
		Expect(scale.Status.Replicas).To(Equal(int32(1)))
		Expect(scale.Status.Selector).To(Equal("serving.modelgate.io/inference=scaled"), "an HPA finds the Pods by it")

		scale.Spec.Replicas = 3
		Expect(c.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(scale))).To(Succeed())
		Expect(c.Get(ctx, scaledKey, obj)).To(Succeed())
		Expect(obj.Spec.Replicas).To(Equal(ptr.To[int32](3)))

		By("through v1alpha1, the scale and the status convert")
		alpha := &servingv1alpha1.AIInference{}
		Expect(c.Get(ctx, scaledKey, alpha)).To(Succeed())
		Expect(alpha.Spec.Replicas).To(Equal(ptr.To[int32](3)))
		Expect(alpha.Status.Replicas).To(Equal(int32(1)))
		Expect(alpha.Status.Selector).To(Equal("serving.modelgate.io/inference=scaled"))
		alphaScale := &autoscalingv1.Scale{}
		Expect(c.SubResource("scale").Get(ctx, alpha, alphaScale)).To(Succeed())
		alphaScale.Spec.Replicas = 0
		Expect(c.SubResource("scale").Update(ctx, alpha, client.WithSubResourceBody(alphaScale))).To(Succeed())
		Expect(c.Get(ctx, scaledKey, obj)).To(Succeed())
		Expect(obj.Spec.Replicas).To(Equal(ptr.To[int32](0)), "scaled to zero through v1alpha1")
	})

	It("lists the same objects in every version, as kubectl get does", func() {
		names := func(list client.ObjectList) []string {
			GinkgoHelper()
			Expect(c.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			var out []string
			switch l := list.(type) {
			case *servingv1alpha1.AIInferenceList:
				for _, it := range l.Items {
					out = append(out, it.Name)
				}
			case *servingv1beta1.AIInferenceList:
				for _, it := range l.Items {
					out = append(out, it.Name)
				}
			case *servingv1.AIInferenceList:
				for _, it := range l.Items {
					out = append(out, it.Name)
				}
			}
			return out
		}
		all := []string{"llama-alpha", "two-products"}
		Expect(names(&servingv1.AIInferenceList{})).To(ConsistOf(all))
		Expect(names(&servingv1beta1.AIInferenceList{})).To(ConsistOf(all))
		Expect(names(&servingv1alpha1.AIInferenceList{})).To(ConsistOf(all))
	})

	It("rejects an invalid object with every problem at its field path", func() {
		alpha := &servingv1alpha1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-alpha"},
			Spec:       servingv1alpha1.AIInferenceSpec{ModelSource: "ftp://models/llama"},
		}
		err := c.Create(ctx, alpha)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.model.uri: Invalid value: "ftp://models/llama": unsupported scheme "ftp"`),
			"a v1alpha1 modelSource that is not a valid URI converts as it is and validation names the v1 field")

		obj := &servingv1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-v1"},
			Spec: servingv1.AIInferenceSpec{
				Model: servingv1.ModelSpec{URI: "hf://meta-llama/Llama-3.1-8B", Revision: "main branch", CredentialsSecretRef: &servingv1.SecretReference{Name: "Not_A_Secret"}},
				GPU:   &servingv1.GPUSpec{Products: []string{"A100 80GB"}},
			},
		}
		err = c.Create(ctx, obj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		status := err.(apierrors.APIStatus).Status()
		Expect(status.Code).To(Equal(int32(http.StatusUnprocessableEntity)))
		var fields []string
		for _, cause := range status.Details.Causes {
			fields = append(fields, cause.Field)
		}
		Expect(fields).To(ConsistOf("spec.model.revision", "spec.gpu.products[0]", "spec.model.credentialsSecretRef.name"))
		Expect(err.Error()).To(ContainSubstring(`spec.gpu.products[0]: Invalid value: "A100 80GB": product "A100 80GB" is not a valid label value`))

		By("the schema's CEL rules: GPUs only through spec.gpu")
		obj = &servingv1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gpu-in-resources"},
			Spec: servingv1.AIInferenceSpec{
				Model:     servingv1.ModelSpec{URI: "s3://acme-ml-models/llama"},
				Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			},
		}
		err = c.Create(ctx, obj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.resources: Invalid value"))
		Expect(err.Error()).To(ContainSubstring("GPUs are asked with spec.gpu"))
	})

	It("applies the workload policies to AIInference through input.workload", func() {
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "aiinference-gpu-limit"}}
		wp.Spec.Rego = gpuLimit
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Match.Kinds = []string{"AIInference"}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 1}`)}
		applyPolicy(ctx, c, wp)
		obj := &servingv1beta1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "too-many-gpus"},
			Spec: servingv1beta1.AIInferenceSpec{
				Model: servingv1beta1.ModelSpec{URI: "s3://acme-ml-models/llama"},
				GPU:   &servingv1beta1.GPUSpec{Count: 4},
			},
		}
		err := c.Create(ctx, obj.DeepCopy(), client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("[aiinference-gpu-limit] asks for 4 GPUs, at most 1"))
		obj.Spec.GPU.Count = 1
		Expect(c.Create(ctx, obj, client.DryRunAll)).To(Succeed())
	})

	It("ratchets AIInference updates: a label on one a tighter policy denies passes with a warning, more GPUs do not", func() {
		obj := &servingv1beta1.AIInference{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admitted-before"},
			Spec: servingv1beta1.AIInferenceSpec{
				Model: servingv1beta1.ModelSpec{URI: "s3://acme-ml-models/llama"},
				GPU:   &servingv1beta1.GPUSpec{Count: 4},
			},
		}
		Expect(c.Create(ctx, obj)).To(Succeed())
		wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "aiinference-gpu-ratchet"}}
		wp.Spec.Rego = gpuLimit
		wp.Spec.Match.Namespaces = []string{ns}
		wp.Spec.Match.Kinds = []string{"AIInference"}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 2}`)}
		applyPolicy(ctx, c, wp)
		Expect(c.Create(ctx, &servingv1beta1.AIInference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new-four"}, Spec: obj.Spec}, client.DryRunAll)).
			To(MatchError(ContainSubstring("[aiinference-gpu-ratchet] asks for 4 GPUs, at most 2")))

		warn.Take()
		cur := &servingv1beta1.AIInference{}
		Expect(c.Get(ctx, key(obj.Name), cur)).To(Succeed())
		cur.Labels = map[string]string{"touched": "yes"}
		Expect(c.Update(ctx, cur)).To(Succeed())
		Expect(warn.Take()).To(ContainElement("[aiinference-gpu-ratchet] existing violation, not introduced by this update: asks for 4 GPUs, at most 2"))

		Expect(c.Get(ctx, key(obj.Name), cur)).To(Succeed())
		cur.Spec.GPU.Count = 8
		Expect(c.Update(ctx, cur)).To(MatchError(ContainSubstring("[aiinference-gpu-ratchet] asks for 8 GPUs, at most 2")))
	})

	It("migrates stored objects and prunes v1alpha1 from status.storedVersions", func() {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(c.Get(ctx, client.ObjectKey{Name: aiinferenceCRD}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))
		Expect(crd.Spec.Conversion.Strategy).To(Equal(apiextensionsv1.WebhookConverter))

		By("pretending the cluster once stored v1alpha1, as one upgraded from it has")
		crd.Status.StoredVersions = []string{"v1alpha1", "v1"}
		Expect(c.Status().Update(ctx, crd)).To(Succeed())

		dyn, err := dynamic.NewForConfig(adminCfg)
		Expect(err).NotTo(HaveOccurred())
		report, err := migrate.Run(ctx, dyn, migrate.Options{CRD: aiinferenceCRD, PruneStoredVersions: true})
		Expect(err).NotTo(HaveOccurred())
		Expect(report.StorageVersion).To(Equal("v1"))
		Expect(report.Failed).To(BeZero())
		Expect(report.Total).To(BeNumerically(">=", 2))
		Expect(report.StoredVersionsAfter).To(Equal([]string{"v1"}))
		Expect(c.Get(ctx, client.ObjectKey{Name: aiinferenceCRD}, crd)).To(Succeed())
		Expect(crd.Status.StoredVersions).To(Equal([]string{"v1"}))

		obj := &servingv1.AIInference{}
		Expect(c.Get(ctx, key("two-products"), obj)).To(Succeed())
		Expect(obj.Spec.GPU.Products).To(HaveLen(2), "rewriting in place changes nothing in the spec")
	})
})
