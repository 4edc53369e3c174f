package integration_test

import (
	"context"
	"maps"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/enginefacts"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// publishedCase is a Deployment of a manifest an engine's project publishes
// (testdata/published), and how a user opts it in.
type publishedCase struct {
	// file and name: the file under testdata/published and the Deployment
	// in it.
	file, name string
	// engine and model are the modelgate.io/engine and modelgate.io/model
	// the user adds to the pod template (model "" where the manifest names
	// no model modelgate can load: Triton's NFS model repository, Dynamo's
	// frontend), beside modelgate.io/inject: "true". Nothing else changes.
	engine, model string
	// serving is the container that runs the engine.
	serving string
	// port is where the engine serves its readiness endpoint, read from the
	// manifest by hand (0: nowhere, its status server is off); the spec
	// checks that engines.yaml says the same.
	port int32
	// edit, when set, changes the published object before it is admitted:
	// a variant of it a user would write.
	edit func(*appsv1.Deployment)
	// warning, when set, is what an admission warning must say.
	warning string
}

// withoutProbes takes the probes out of the container.
func withoutProbes(container string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		for i := range d.Spec.Template.Spec.Containers {
			if c := &d.Spec.Template.Spec.Containers[i]; c.Name == container {
				c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = nil, nil, nil
			}
		}
	}
}

func containerOf(d *appsv1.Deployment, name string) *corev1.Container {
	GinkgoHelper()
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	Fail("no container " + name)
	return nil
}

// Issue 46, item 4: the Kubernetes examples vLLM, SGLang, llm-d, Dynamo
// and Triton publish today, opted in with annotations only, go through the
// real API server and keep everything their authors wrote; modelgate only
// adds, to the engine's container, and its probes check the port the
// engine serves on as engines.yaml reads the command line.
var _ = Describe("published manifests of today", func() {
	var (
		ctx   context.Context
		c     client.Client
		warn  *env.Warnings
		facts *enginefacts.Table
	)
	BeforeEach(func() {
		ctx = context.Background()
		u, err := testEnv.AddUser(envtest.User{Name: aliceName, Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		cfg := u.Config()
		warn = &env.Warnings{}
		cfg.WarningHandlerWithContext = warn
		c, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
		Expect(err).NotTo(HaveOccurred())
		facts, err = enginefacts.Load()
		Expect(err).NotTo(HaveOccurred())
	})

	DescribeTable("keeps what its authors wrote and probes the engine's own port",
		func(pc publishedCase) {
			ns := namespace(ctx, nil)
			d := publishedDeployment(pc.file, pc.name)
			d.Namespace = ns
			if pc.edit != nil {
				pc.edit(d)
			}

			// As the authors wrote it, defaulted by the API server, and not
			// opted in: modelgate leaves it alone.
			base := d.DeepCopy()
			Expect(c.Create(ctx, base, client.DryRunAll)).To(Succeed())
			Expect(base.Spec.Template.Annotations).NotTo(HaveKey(annotations.Injected))

			got := d.DeepCopy()
			tpl := &got.Spec.Template
			tpl.Annotations = maps.Clone(tpl.Annotations)
			if tpl.Annotations == nil {
				tpl.Annotations = map[string]string{}
			}
			tpl.Annotations[annotations.Inject] = "true"
			tpl.Annotations[annotations.Engine] = pc.engine
			if pc.model != "" {
				tpl.Annotations[annotations.Model] = pc.model
			}
			warn.Take()
			Expect(c.Create(ctx, got)).To(Succeed())
			warnings := warn.Take()
			AddReportEntry("admission warnings", warnings)
			rec := recordOf(got)
			AddReportEntry("injection record", rec.String())

			// a. Nothing the authors wrote is overridden or removed, and
			// what modelgate added is its own.
			changed, added := authoredDiff(comparedFields(base), comparedFields(got), nil)
			Expect(changed).To(BeEmpty(), "fields the authors wrote that modelgate changed or removed")
			for _, p := range added {
				Expect(ownedAddition(p, rec, pc.serving)).To(BeTrue(),
					"modelgate added %s, which its record %s does not own", p, rec.String())
			}

			// c. It took the engine's container for the serving one.
			for _, name := range rec.Containers() {
				Expect(name).To(Equal(pc.serving), "the record names a part of another container than the engine's: %s", rec.String())
			}

			// b. Its probes check where engines.yaml says the engine serves,
			// and the authors' probes are as they wrote them.
			authored, served := containerOf(base, pc.serving), containerOf(got, pc.serving)
			port, path := servedEndpoint(facts, pc.engine, authored)
			Expect(port).To(Equal(pc.port), "engines.yaml and the manifest read by hand disagree on the engine's port")
			Expect(served.LivenessProbe).To(Equal(authored.LivenessProbe), "modelgate never writes a liveness probe")
			for _, probe := range []struct {
				kind             string
				authored, served *corev1.Probe
			}{
				{"readinessProbe", authored.ReadinessProbe, served.ReadinessProbe},
				{"startupProbe", authored.StartupProbe, served.StartupProbe},
			} {
				owned := rec.Owned(probe.kind + "/" + pc.serving)
				switch {
				case probe.authored != nil:
					Expect(probe.served).To(Equal(probe.authored), "the authors' %s", probe.kind)
					Expect(owned).To(BeFalse(), "the record claims the authors' %s", probe.kind)
				case port == 0:
					Expect(probe.served).To(BeNil(), "a %s where the engine serves no endpoint", probe.kind)
				default:
					Expect(owned).To(BeTrue(), "%s: %s", probe.kind, rec.String())
					Expect(probe.served).NotTo(BeNil())
					Expect(probe.served.HTTPGet).NotTo(BeNil(), "the %s modelgate added", probe.kind)
					Expect(probe.served.HTTPGet.Path).To(Equal(path), "the %s modelgate added", probe.kind)
					Expect(probe.served.HTTPGet.Port).To(Equal(intstr.FromInt32(port)), "the %s modelgate added", probe.kind)
				}
			}
			if pc.warning != "" {
				Expect(warnings).To(ContainElement(ContainSubstring(pc.warning)))
			}
		},
		Entry("vLLM's guide: a startup probe beside the authors' readiness probe, on 8000", publishedCase{
			file: "vllm-k8s-nvidia-gpu.yaml", name: "mistral-7b", engine: "vllm",
			model: "hf://mistralai/Mistral-7B-Instruct-v0.3", serving: "mistral-7b", port: 8000,
		}),
		Entry("SGLang's example: probes on its --port 30000 beside the authors' liveness probe", publishedCase{
			file: "sglang-k8s-sglang-service.yaml", name: "meta-llama-31-8b-instruct-sglang", engine: "sglang",
			model: "hf://meta-llama/Meta-Llama-3.1-8B-Instruct", serving: "meta-llama-31-8b-instruct-sglang", port: 30000,
		}),
		Entry("llm-d's optimized baseline: the authors' three probes kept", publishedCase{
			file: "llm-d-optimized-baseline-gpu-vllm.yaml", name: "optimized-baseline-nvidia-gpu-vllm-decode", engine: "vllm",
			model: "hf://Qwen/Qwen3-32B", serving: "modelserver", port: 8000,
		}),
		Entry("llm-d's P/D decode: vLLM on 8200 behind the routing sidecar on 8000, the authors' probes kept", publishedCase{
			file: "llm-d-pd-disaggregation-gpu-vllm.yaml", name: "pd-disaggregation-nvidia-gpu-vllm-decode", engine: "vllm",
			model: "hf://openai/gpt-oss-120b", serving: "modelserver", port: 8200,
		}),
		Entry("llm-d's P/D decode without its probes: modelgate's probes check vLLM's 8200, never the sidecar's 8000", publishedCase{
			file: "llm-d-pd-disaggregation-gpu-vllm.yaml", name: "pd-disaggregation-nvidia-gpu-vllm-decode", engine: "vllm",
			model: "hf://openai/gpt-oss-120b", serving: "modelserver", port: 8200, edit: withoutProbes("modelserver"),
		}),
		Entry("llm-d's P/D prefill: vLLM on 8000, the authors' probes kept", publishedCase{
			file: "llm-d-pd-disaggregation-gpu-vllm.yaml", name: "pd-disaggregation-nvidia-gpu-vllm-prefill", engine: "vllm",
			model: "hf://openai/gpt-oss-120b", serving: "modelserver", port: 8000,
		}),
		Entry("Triton's Helm chart: the authors' probes kept", publishedCase{
			file: "triton-k8s-onprem.yaml", name: "triton-triton-inference-server", engine: "triton",
			serving: "triton-inference-server", port: 8000,
		}),
		Entry("Dynamo's frontend as its operator renders it: a startup probe on /health at DYN_HTTP_PORT 8000", publishedCase{
			file: "dynamo-vllm-agg-rendered.yaml", name: "vllm-agg-frontend", engine: "dynamo",
			serving: "main", port: 8000,
		}),
		Entry("Dynamo's vLLM worker as its operator renders it: the operator's probes on DYN_SYSTEM_PORT 9090 kept", publishedCase{
			file: "dynamo-vllm-agg-rendered.yaml", name: "vllm-agg-vllmdecodeworker", engine: "dynamo",
			model: "hf://Qwen/Qwen3-0.6B", serving: "main", port: 9090,
		}),
		Entry("Dynamo's vLLM worker in a plain Deployment with DYN_SYSTEM_PORT: probes on /health at 9090", publishedCase{
			file: "dynamo-vllm-worker-plain.yaml", name: "dynamo-vllm-worker-status-port", engine: "dynamo",
			model: "hf://Qwen/Qwen3-0.6B", serving: "worker", port: 9090,
		}),
		Entry("Dynamo's vLLM worker in a plain Deployment without a status server: no probes, a warning naming DYN_SYSTEM_PORT", publishedCase{
			file: "dynamo-vllm-worker-plain.yaml", name: "dynamo-vllm-worker", engine: "dynamo",
			model: "hf://Qwen/Qwen3-0.6B", serving: "worker", port: 0, warning: "DYN_SYSTEM_PORT",
		}),
	)
})

// The comparison above passes only when nothing the authors wrote changed:
// it must see each way a field can be overridden or removed, and tell
// modelgate's additions from others.
var _ = Describe("the comparison of published manifests with their injected copies", func() {
	It("finds an overridden argument, probe port or variable and a removed field, and not an addition", func() {
		base := publishedDeployment("llm-d-pd-disaggregation-gpu-vllm.yaml", "pd-disaggregation-nvidia-gpu-vllm-decode")
		container := "spec.template.spec.containers.[name=modelserver]."
		names := func(ps []fieldPath) []string {
			out := make([]string, len(ps))
			for i, p := range ps {
				out[i] = p.String()
			}
			return out
		}
		diff := func(base *appsv1.Deployment, edit func(*corev1.PodSpec)) (changed, added []fieldPath) {
			got := base.DeepCopy()
			edit(&got.Spec.Template.Spec)
			return authoredDiff(comparedFields(base), comparedFields(got), nil)
		}

		changed, added := diff(base, func(s *corev1.PodSpec) { s.Containers[0].Args[len(s.Containers[0].Args)-1] = "--port=8000" })
		Expect(names(changed)).To(ConsistOf(container+"args"), "a changed argument")
		Expect(added).To(BeEmpty())
		changed, _ = diff(base, func(s *corev1.PodSpec) { s.Containers[0].Args = append(s.Containers[0].Args, "--served-model-name=x") })
		Expect(names(changed)).To(ConsistOf(container+"args"), "an argument added to the authors' command line")
		changed, _ = diff(base, func(s *corev1.PodSpec) { s.Containers[0].ReadinessProbe.HTTPGet.Port = intstr.FromInt32(8000) })
		Expect(names(changed)).To(ConsistOf(container+"readinessProbe.httpGet.port"), "a probe moved to another port")
		changed, _ = diff(base, func(s *corev1.PodSpec) { s.Containers[0].Env = s.Containers[0].Env[1:] })
		Expect(names(changed)).To(ConsistOf(container+"env.[name=HF_TOKEN]"), "a removed variable")
		changed, _ = diff(base, func(s *corev1.PodSpec) { s.InitContainers[0].Ports = nil })
		Expect(names(changed)).To(ConsistOf("spec.template.spec.initContainers.[name=routing-proxy].ports"), "the sidecar's port removed")
		changed, _ = diff(base, func(s *corev1.PodSpec) { s.Volumes[0].EmptyDir.SizeLimit = nil })
		Expect(names(changed)).To(ConsistOf("spec.template.spec.volumes.[name=shm].emptyDir.sizeLimit"), "a removed limit")
		tolerating := base.DeepCopy()
		tolerating.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists}}
		changed, added = diff(tolerating, func(s *corev1.PodSpec) { s.Tolerations[0].Key = "b" })
		Expect(names(changed)).To(ConsistOf("spec.template.spec.tolerations.[0]"), "a changed element of a list without a key")
		Expect(names(added)).To(ConsistOf("spec.template.spec.tolerations.[+0]"))

		changed, added = diff(base, func(s *corev1.PodSpec) {
			s.Containers[0].Env = append([]corev1.EnvVar{{Name: mutators.EnvHFHubOffline, Value: "1"}}, s.Containers[0].Env...)
			s.InitContainers = append([]corev1.Container{{Name: "model-loader", Image: "loader"}}, s.InitContainers...)
			s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
		})
		Expect(changed).To(BeEmpty(), "variables and init containers put ahead of the authors' change none of theirs")
		Expect(names(added)).To(ConsistOf(container+"env.[name=HF_HUB_OFFLINE]",
			"spec.template.spec.initContainers.[name=model-loader]", "spec.template.spec.tolerations"))

		rec := mutators.Record{Owns: []string{"env/modelserver/HF_HUB_OFFLINE=1", "initContainer/model-loader",
			"toleration/NoSchedule/nvidia.com/gpu"}}
		for _, p := range added {
			Expect(ownedAddition(p, rec, "modelserver")).To(BeTrue(), "%s", p)
		}
		podSpec := fieldPath{"spec", "template", "spec"}
		serving := podSpec.with("containers").with("[name=modelserver]")
		Expect(ownedAddition(serving.with("env").with("[name=HF_HUB_OFFLINE]"), rec, "routing-proxy")).To(BeFalse(),
			"an addition to another container than the serving one")
		for what, p := range map[string]fieldPath{
			"a probe added to the sidecar":           podSpec.with("initContainers").with("[name=routing-proxy]").with("readinessProbe"),
			"a volume the record does not own":       podSpec.with("volumes").with("[name=cache]"),
			"a pod field no part names":              podSpec.with("securityContext"),
			"a variable the record does not own":     serving.with("env").with("[name=HF_HUB_CACHE]"),
			"a liveness probe, which no part names":  serving.with("livenessProbe"),
			"a command where the authors wrote none": serving.with("command"),
		} {
			Expect(ownedAddition(p, rec, "modelserver")).To(BeFalse(), what)
		}
	})
})
