package integration_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// testProfiles are the Configuration profiles of the suite's modelgate.
var testProfiles = map[string]map[string]string{
	// A platform default of one H100 for serving workloads.
	"h100-serving": {annotations.GPU: "1", annotations.GPUProduct: h100},
}

// deployment is a Deployment shaped like a published manifest: its pod
// template annotated with annos, running the containers.
func deployment(ns, name string, annos map[string]string, containers ...corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annos},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
}

func gpuResources(n int64) corev1.ResourceRequirements {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": q}}
}

func recordOf(d *appsv1.Deployment) mutators.Record {
	GinkgoHelper()
	var r mutators.Record
	Expect(json.Unmarshal([]byte(d.Spec.Template.Annotations[annotations.Injected]), &r)).To(Succeed())
	return r
}

// Issue 14, items 1-4: manifests as users publish them keep what they
// declare, through the real API server.
var _ = Describe("injection into manifests as they are published", func() {
	var (
		ctx   context.Context
		alice client.Client
	)
	BeforeEach(func() {
		ctx = context.Background()
		alice = authenticated(aliceName, "system:masters")
	})

	nim := func() corev1.Container {
		return corev1.Container{Name: "nim", Image: "nvcr.io/nim/meta/llama-3.1-70b-instruct:1.3", Resources: gpuResources(8),
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}}}
	}

	It("keeps a GPU limit the container declares over a profile's, and never takes it away", func() {
		ns := namespace(ctx, nil)
		d := deployment(ns, "nim", map[string]string{annotations.Inject: "true", annotations.Profile: "h100-serving"}, nim())
		Expect(alice.Create(ctx, d)).To(Succeed())
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), resource.MustParse("8")))
		Expect(recordOf(d).Owns).NotTo(ContainElement(HavePrefix("limits/")))
		Expect(recordOf(d).Owns).To(ContainElement("nodeAffinity/In/nvidia.com/gpu.product"))

		// Opting out takes modelgate's affinity and toleration out and
		// leaves the user's limit.
		d.Spec.Template.Annotations[annotations.Inject] = "false"
		Expect(alice.Update(ctx, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers[0].Resources.Limits).To(HaveKeyWithValue(corev1.ResourceName("nvidia.com/gpu"), resource.MustParse("8")))
		Expect(d.Spec.Template.Spec.Affinity).To(BeNil())
		Expect(d.Spec.Template.Spec.Tolerations).To(BeEmpty())
	})

	It("denies an annotation that contradicts the container's own GPU limit, naming both", func() {
		ns := namespace(ctx, nil)
		d := deployment(ns, "nim", map[string]string{annotations.Inject: "true", annotations.GPU: "1"}, nim())
		err := alice.Create(ctx, d)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.template.metadata.annotations[modelgate.io/gpu]: Invalid value: "1": ` +
			`contradicts container "nim", which declares nvidia.com/gpu: 8 in its resources; set modelgate.io/gpu to 8 or remove it, ` +
			`or remove the container's own nvidia.com/gpu`))
	})

	It("gives Triton a startup budget that covers its own probes' 600 s delay", func() {
		ns := namespace(ctx, nil)
		probe := func(path string) *corev1.Probe {
			return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
				InitialDelaySeconds: 600, PeriodSeconds: 10}
		}
		triton := corev1.Container{Name: "triton", Image: "nvcr.io/nvidia/tritonserver:24.08-py3",
			Command: []string{"tritonserver", "--model-repository=/models"}, Resources: gpuResources(1),
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}, {Name: "grpc", ContainerPort: 8001}, {Name: "metrics", ContainerPort: 8002}},
			ReadinessProbe: probe("/v2/health/ready"), LivenessProbe: probe("/v2/health/live")}
		d := deployment(ns, "triton", map[string]string{annotations.Inject: "true", annotations.Engine: "triton"}, triton)
		Expect(alice.Create(ctx, d)).To(Succeed())
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.StartupProbe).NotTo(BeNil())
		Expect(c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold).To(BeNumerically(">=", 600+10*3))
		Expect(c.StartupProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(8000)))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/v2/health/ready"), "the user's readiness probe is theirs")
		Expect(c.ReadinessProbe.InitialDelaySeconds).To(Equal(int32(600)))
		Expect(c.Ports).To(HaveLen(3), "the serving port is declared already")
	})

	It("probes TGI on the port its PORT variable sets", func() {
		ns := namespace(ctx, nil)
		tgi := corev1.Container{Name: "tgi", Image: "ghcr.io/huggingface/text-generation-inference:3.0",
			Args: []string{"--model-id", "mistralai/Mistral-7B-Instruct-v0.3"}, Resources: gpuResources(1),
			Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}}}
		d := deployment(ns, "tgi", map[string]string{annotations.Inject: "true", annotations.Engine: "tgi"}, tgi)
		Expect(alice.Create(ctx, d)).To(Succeed())
		c := d.Spec.Template.Spec.Containers[0]
		Expect(c.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(8080)))
		Expect(c.StartupProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(8080)))
		Expect(c.Ports).To(ConsistOf(HaveField("ContainerPort", int32(8080))))
	})

	It("serves from the vllm container beside a metrics sidecar without being told which", func() {
		ns := namespace(ctx, nil)
		vllm := corev1.Container{Name: "vllm", Image: "vllm/vllm-openai:v0.8.5",
			Command: []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"}}
		exporter := corev1.Container{Name: "metrics", Image: "quay.io/prometheus/statsd-exporter:v0.26.1"}
		d := deployment(ns, "vllm", map[string]string{annotations.Inject: "true", annotations.Engine: "vllm", annotations.GPU: "1",
			annotations.Model: hfModel}, vllm, exporter)
		Expect(alice.Create(ctx, d)).To(Succeed())
		spec := d.Spec.Template.Spec
		Expect(spec.Containers[0].StartupProbe).NotTo(BeNil())
		Expect(spec.Containers[0].Resources.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
		Expect(spec.Containers[0].VolumeMounts).To(ContainElement(HaveField("Name", "model-store")))
		Expect(spec.Containers[1].StartupProbe).To(BeNil())
		Expect(spec.Containers[1].Resources.Limits).To(BeEmpty())
		Expect(spec.Containers[1].VolumeMounts).To(BeEmpty())
	})
})

// A Job's pod template cannot change once created: an update to the Job
// (a label, a changed setting on the Job's own metadata) is never turned
// into a template change the API server refuses.
var _ = Describe("updating an injected Job", func() {
	It("leaves the Job's pod template as injected at creation", func() {
		ctx := context.Background()
		alice := authenticated(aliceName, "system:masters")
		ns := namespace(ctx, nil)
		job := builders.New("Job", builders.Options{Namespace: ns, Name: "finetune", Annotations: map[string]string{
			annotations.Inject: "true", annotations.Model: hfModel, annotations.ModelSize: "20Gi",
		}}).(*batchv1.Job)
		Expect(alice.Create(ctx, job)).To(Succeed())
		tpl := job.Spec.Template.DeepCopy()
		Expect(tpl.Spec.InitContainers).NotTo(BeEmpty())

		job.Labels["stage"] = "eval"
		job.Annotations[annotations.ModelSize] = "40Gi"
		Expect(alice.Update(ctx, job)).To(Succeed())
		Expect(job.Labels).To(HaveKeyWithValue("stage", "eval"))
		Expect(job.Spec.Template).To(Equal(*tpl))
	})
})
