package e2e_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/controller/aiinference"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// The engines of internal/enginefacts' table on the real node: each
// AIInference preset, Dynamo's frontend and worker, and llm-d's decode
// Pod, as their published manifests lay them out, run by the stand-in
// engine under the images' own names, entrypoints and variables.
var _ = Describe("On the real node, the engines of today", func() {
	for _, engine := range slices.Sorted(maps.Keys(aiinference.DefaultEngines)) {
		It("an AIInference of the "+string(engine)+" preset becomes Ready, its engine serving the model", func(ctx SpecContext) {
			ns := newNamespace(ctx, "real-preset")
			routeToRealNode(ctx, ns)
			ai := developerClient()
			DeferCleanup(func(ctx SpecContext) {
				Expect(ai.DeleteAllOf(ctx, &servingv1.AIInference{}, client.InNamespace(ns))).To(Succeed())
			})
			inf := &servingv1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tiny"},
				Spec: servingv1.AIInferenceSpec{
					Engine: servingv1.EngineSpec{Name: engine},
					GPU:    &servingv1.GPUSpec{Count: 1},
				},
			}
			// What the engine serves, and where it says so.
			served, path := tinyLLM, "/v1/models"
			if engine == servingv1.EngineTriton {
				// Triton reads a model repository: a folder per model,
				// each with a numbered version. It takes every folder
				// there for a model, so its repository reaches it as a
				// claim, mounted as it is (the loader's .modelgate beside
				// a loaded model would be one: docs/engines.md).
				dir := localClaim(ctx, ns, "triton-repository", "default")
				Expect(os.MkdirAll(filepath.Join(dir, "tiny", "1"), 0o755)).To(Succeed())
				Expect(os.WriteFile(filepath.Join(dir, "tiny", "config.pbtxt"), []byte(`backend: "onnxruntime"`), 0o644)).To(Succeed())
				Expect(os.WriteFile(filepath.Join(dir, "tiny", "1", "model.onnx"), generated(11, 1<<20), 0o644)).To(Succeed())
				inf.Spec.Model = servingv1.ModelSpec{URI: "pvc://triton-repository"}
				served, path = "tiny", "/v2/models/tiny/ready"
			} else {
				hub, commit := startHub("hf_presetToken")
				credentials(ctx, ns, "hub", map[string]string{"HF_TOKEN": "hf_presetToken", "HF_ENDPOINT": hub.URL()})
				inf.Spec.Model = servingv1.ModelSpec{URI: "hf://" + tinyLLM, Revision: commit, CredentialsSecretRef: &servingv1.SecretReference{Name: "hub"}}
			}
			Expect(ai.Create(ctx, inf)).To(Succeed())
			got := &servingv1.AIInference{}
			var pods corev1.PodList
			Eventually(func(g Gomega) {
				g.Expect(ai.Get(ctx, client.ObjectKeyFromObject(inf), got)).To(Succeed())
				g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{annotations.InferenceLabel: "tiny"})).To(Succeed())
				g.Expect(got.Status.Phase).To(Equal(servingv1.PhaseReady), "conditions: %+v; pods: %s", got.Status.Conditions, describePods(pods.Items))
			}).WithContext(ctx).WithTimeout(3*time.Minute).Should(Succeed(), func() string { return events(ctx, ns) + engineLogs(ctx, pods.Items) })
			Expect(pods.Items).To(HaveLen(1))
			pod := &pods.Items[0]
			Expect(pod.Spec.NodeName).To(Equal(realNode().Name))

			By("the preset's image and command line, and the engine serving the model on the AIInference's port")
			c := container(Default, pod.Spec.Containers, aiinference.ServingContainer)
			preset := aiinference.DefaultEngines[engine]
			Expect(c.Image).To(Equal(preset.Image))
			Expect(c.Command).To(Equal(preset.Command))
			Expect(podLogs(ctx, pod, aiinference.ServingContainer)).To(ContainSubstring("engine: loaded "))
			code, body := httpGet(ctx, podURL(pod, strconv.Itoa(int(got.Spec.Engine.Port)), path))
			Expect(code).To(Equal(200), body)
			if engine != servingv1.EngineTriton {
				Expect(body).To(ContainSubstring(`"id":"` + served + `"`))
			}
		}, SpecTimeout(5*time.Minute))
	}

	It("Dynamo: a frontend and a vLLM worker as two Deployments, finding each other through a directory of the node: the frontend Ready once its discovery is done, the worker once its model is loaded and registered, each on the port modelgate probes", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-dynamo")
		routeToRealNode(ctx, ns)
		hub, commit := startHub("hf_dynamoToken")
		credentials(ctx, ns, "hub", map[string]string{"HF_TOKEN": "hf_dynamoToken", "HF_ENDPOINT": hub.URL()})
		// Dynamo's file discovery backend in place of etcd or the
		// Kubernetes API, which its operator uses: a directory both Pods
		// mount, on the one node.
		kv := filepath.Join(realNode().Dir, "dynamo-kv", ns)
		Expect(os.MkdirAll(kv, 0o777)).To(Succeed())
		Expect(os.Chmod(kv, 0o777)).To(Succeed()) // written by the Pods' user, 65532
		DeferCleanup(os.RemoveAll, kv)
		discovery := func(spec *corev1.PodSpec) {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "kv", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: kv, Type: ptr.To(corev1.HostPathDirectory)}}})
			c := &spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kv", MountPath: "/kv"})
			c.Env = append(c.Env, corev1.EnvVar{Name: "DYN_DISCOVERY_BACKEND", Value: "file"}, corev1.EnvVar{Name: "DYN_FILE_KV", Value: "/kv"})
		}
		const image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"

		// As Dynamo's operator renders its Frontend (component_frontend.go).
		frontend := oneContainer(ns, "frontend", map[string]string{annotations.Inject: "true", annotations.Engine: "dynamo"}, corev1.Container{
			Name: "main", Image: image, Command: []string{"python3"}, Args: []string{"-m", "dynamo.frontend"},
			Env: []corev1.EnvVar{{Name: "DYN_HTTP_PORT", Value: "8000"}},
		})
		discovery(&frontend.Spec.Template.Spec)
		Expect(k8s.Create(ctx, frontend)).To(Succeed())
		fpod := readyPod(ctx, ns, "frontend", 2*time.Minute)
		f := container(Default, fpod.Spec.Containers, "main")
		Expect(f.ReadinessProbe).NotTo(BeNil(), "modelgate probes the frontend")
		Expect(f.ReadinessProbe.HTTPGet).NotTo(BeNil())
		Expect(f.ReadinessProbe.HTTPGet.Path).To(Equal("/health"))
		Expect(f.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(8000)), "DYN_HTTP_PORT")
		model := "/v1/models/" + tinyLLM + "/ready"
		code, _ := httpGet(ctx, podURL(&fpod, "8000", model))
		Expect(code).To(Equal(503), "no worker serves the model yet, and the frontend is Ready all the same")

		// As Dynamo's docs run a worker (python3 -m dynamo.vllm --model),
		// its status server on 9090 as the operator sets it.
		worker := oneContainer(ns, "worker", map[string]string{annotations.Inject: "true", annotations.Engine: "dynamo",
			annotations.Model: "hf://" + tinyLLM + "@" + commit, annotations.ModelCredentials: "hub", annotations.GPU: "1"}, corev1.Container{
			Name: "main", Image: image, Command: []string{"python3", "-m", "dynamo.vllm"}, Args: []string{"--model", tinyLLM},
			Env:   []corev1.EnvVar{{Name: "DYN_SYSTEM_PORT", Value: "9090"}},
			Ports: []corev1.ContainerPort{{Name: "nixl", ContainerPort: 19090}},
		})
		discovery(&worker.Spec.Template.Spec)
		Expect(k8s.Create(ctx, worker)).To(Succeed())
		wpod := readyPod(ctx, ns, "worker", 3*time.Minute)
		w := container(Default, wpod.Spec.Containers, "main")
		Expect(w.ReadinessProbe).NotTo(BeNil(), "modelgate probes the worker")
		Expect(w.ReadinessProbe.HTTPGet).NotTo(BeNil())
		Expect(w.ReadinessProbe.HTTPGet.Path).To(Equal("/health"))
		Expect(w.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromInt32(9090)), "DYN_SYSTEM_PORT, not NIXL's or the frontend's port")
		Expect(initStatus(Default, &wpod, loaderName).State.Terminated.ExitCode).To(BeZero())
		Expect(podLogs(ctx, &wpod, "main")).To(ContainSubstring("engine: registered " + tinyLLM))

		By("the frontend serves the model the worker registered")
		Eventually(func(g Gomega) {
			code, body := httpGet(ctx, podURL(&fpod, "8000", model))
			g.Expect(code).To(Equal(200), body)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		_, body := httpGet(ctx, podURL(&fpod, "8000", "/v1/models"))
		Expect(body).To(ContainSubstring(`"id":"` + tinyLLM + `"`))
	}, SpecTimeout(6*time.Minute))

	It("llm-d's P/D decode Deployment as its guide renders it (vLLM on 8200 behind the routing sidecar on 8000), opted in: Ready because its probes are vLLM's, its API answering through the sidecar", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-llmd")
		routeToRealNode(ctx, ns)
		const model = "openai/gpt-oss-120b"
		hub := newHub()
		repo := hubtest.OneCommit(tinyLLMFiles()...)
		hub.AddRepo(model, repo)
		credentials(ctx, ns, "hub", map[string]string{"HF_ENDPOINT": hub.URL()})
		credentials(ctx, ns, "llm-d-hf-token", map[string]string{"HF_TOKEN": "hf_llmdToken"})

		var sa corev1.ServiceAccount
		var d appsv1.Deployment
		docs := strings.Split(publishedLLMDDecode, "\n---\n")
		Expect(docs).To(HaveLen(2))
		Expect(yaml.UnmarshalStrict([]byte(docs[0]), &sa)).To(Succeed())
		Expect(yaml.UnmarshalStrict([]byte(docs[1]), &d)).To(Succeed())
		sa.Namespace, d.Namespace = ns, ns
		// What this machine cannot give it: two replicas of 16 CPUs and
		// 64Gi each. Everything else is as published.
		d.Spec.Replicas = ptr.To[int32](1)
		vllm := &d.Spec.Template.Spec.Containers[0]
		small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi"), "nvidia.com/gpu": resource.MustParse("4")}
		vllm.Resources = corev1.ResourceRequirements{Limits: small, Requests: small}
		// The opt-in, on the pod template: nothing else.
		d.Spec.Template.Annotations = map[string]string{annotations.Inject: "true", annotations.Engine: "vllm",
			annotations.Model: "hf://" + model + "@" + repo.Refs["main"], annotations.ModelCredentials: "hub"}
		Expect(k8s.Create(ctx, &sa)).To(Succeed())
		Expect(k8s.Create(ctx, &d)).To(Succeed())

		var pod corev1.Pod
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"llm-d.ai/role": "decode"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(1))
			pod = pods.Items[0]
			g.Expect(cluster.PodReady(&pod)).To(BeTrue(), "pod %s is not Ready: %s", pod.Name, describeStatus(&pod))
		}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return events(ctx, ns) })
		Expect(pod.Spec.NodeName).To(Equal(realNode().Name))

		By("the probes are on vLLM's port, 8200, never the sidecar's 8000")
		c := container(Default, pod.Spec.Containers, "modelserver")
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			Expect(p).NotTo(BeNil())
			Expect(p.HTTPGet).NotTo(BeNil())
			Expect(p.HTTPGet.Port).To(Or(Equal(intstr.FromString("modelserver")), Equal(intstr.FromInt32(8200))))
		}
		Expect(c.Ports[0]).To(HaveField("ContainerPort", BeEquivalentTo(8200)))
		proxy := container(Default, pod.Spec.InitContainers, "routing-proxy")
		Expect(proxy.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)), "still a native sidecar")
		Expect(initStatus(Default, &pod, "routing-proxy").Started).To(HaveValue(BeTrue()))
		Expect(initStatus(Default, &pod, loaderName).State.Terminated.ExitCode).To(BeZero())

		By("vLLM serves the model on 8200, and through the sidecar on 8000")
		Expect(podLogs(ctx, &pod, "modelserver")).To(ContainSubstring("engine: loaded " + model))
		for _, port := range []string{"8200", "8000"} {
			code, body := httpGet(ctx, podURL(&pod, port, "/v1/models"))
			Expect(code).To(Equal(200), "port %s", port)
			Expect(body).To(ContainSubstring(`"id":"`+model+`"`), "port %s", port)
		}
		Expect(podLogs(ctx, &pod, "routing-proxy")).To(ContainSubstring("proxy: GET /v1/models 200"))
	}, SpecTimeout(5*time.Minute))
})

// developerClient is the developer's client with modelgate's types.
func developerClient() client.Client {
	s, err := env.Scheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(gpuCluster.Developer, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// oneContainer is a one-replica Deployment of one container whose Pods are
// labelled app=name, with annotations on its pod template.
func oneContainer(ns, name string, annots map[string]string, c corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annots},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
}

// describePods is describeStatus of each Pod.
func describePods(pods []corev1.Pod) string {
	var out []string
	for i := range pods {
		out = append(out, pods[i].Name+": "+describeStatus(&pods[i]))
	}
	return strings.Join(out, "\n")
}

// engineLogs are the serving containers' logs of Pods, for a failure
// message (those that have one).
func engineLogs(ctx context.Context, pods []corev1.Pod) string {
	var b strings.Builder
	for i := range pods {
		for _, c := range pods[i].Spec.Containers {
			logs, err := clientset().CoreV1().Pods(pods[i].Namespace).GetLogs(pods[i].Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			if err == nil {
				b.WriteString("\n" + pods[i].Name + "/" + c.Name + ":\n" + string(logs))
			}
		}
	}
	return b.String()
}

// publishedLLMDDecode is llm-d's P/D disaggregation guide for NVIDIA GPUs
// and vLLM (guides/pd-disaggregation/modelserver/gpu/vllm/base), rendered
// by kubectl kustomize at github.com/llm-d/llm-d 7edda66d76cc (2026-06-27):
// its ServiceAccount and decode Deployment, verbatim. (Its prefill
// Deployment, eight one-GPU replicas of vLLM alone, is left out.)
const publishedLLMDDecode = `apiVersion: v1
automountServiceAccountToken: false
kind: ServiceAccount
metadata:
  labels:
    llm-d.ai/accelerator-variant: gpu
    llm-d.ai/accelerator-vendor: nvidia
    llm-d.ai/engine-type: vllm
    llm-d.ai/guide: pd-disaggregation
    llm-d.ai/model: gpt-oss-120b
  name: pd-disaggregation-nvidia-gpu-vllm-sa
---
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    llm-d.ai/accelerator-variant: gpu
    llm-d.ai/accelerator-vendor: nvidia
    llm-d.ai/engine-type: vllm
    llm-d.ai/guide: pd-disaggregation
    llm-d.ai/model: gpt-oss-120b
    llm-d.ai/role: decode
  name: pd-disaggregation-nvidia-gpu-vllm-decode
spec:
  replicas: 2
  selector:
    matchLabels:
      llm-d.ai/accelerator-variant: gpu
      llm-d.ai/accelerator-vendor: nvidia
      llm-d.ai/engine-type: vllm
      llm-d.ai/guide: pd-disaggregation
      llm-d.ai/model: gpt-oss-120b
      llm-d.ai/role: decode
  template:
    metadata:
      labels:
        llm-d.ai/accelerator-variant: gpu
        llm-d.ai/accelerator-vendor: nvidia
        llm-d.ai/engine-type: vllm
        llm-d.ai/guide: pd-disaggregation
        llm-d.ai/model: gpt-oss-120b
        llm-d.ai/role: decode
    spec:
      containers:
      - args:
        - openai/gpt-oss-120b
        - --disable-access-log-for-endpoints=/health,/metrics,/v1/models
        - --tensor-parallel-size=4
        - --block-size=128
        - --kv-transfer-config
        - '{"kv_connector":"NixlConnector", "kv_role":"kv_both"}'
        - --no-disable-hybrid-kv-cache-manager
        - --port=8200
        command:
        - vllm
        - serve
        env:
        - name: HF_TOKEN
          valueFrom:
            secretKeyRef:
              key: HF_TOKEN
              name: llm-d-hf-token
        - name: VLLM_NIXL_SIDE_CHANNEL_HOST
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        - name: USER
          value: llm-d
        image: vllm/vllm-openai:v0.23.0
        livenessProbe:
          failureThreshold: 3
          httpGet:
            path: /health
            port: modelserver
          periodSeconds: 10
          timeoutSeconds: 5
        name: modelserver
        ports:
        - containerPort: 8200
          name: modelserver
          protocol: TCP
        - containerPort: 5600
          name: nixl
          protocol: TCP
        readinessProbe:
          failureThreshold: 3
          httpGet:
            path: /v1/models
            port: modelserver
          periodSeconds: 5
          timeoutSeconds: 2
        resources:
          limits:
            cpu: "16"
            memory: 64Gi
            nvidia.com/gpu: "4"
          requests:
            cpu: "16"
            memory: 64Gi
            nvidia.com/gpu: "4"
        startupProbe:
          failureThreshold: 120
          httpGet:
            path: /v1/models
            port: modelserver
          initialDelaySeconds: 15
          periodSeconds: 30
          timeoutSeconds: 5
        volumeMounts:
        - mountPath: /dev/shm
          name: shm
        - mountPath: /.cache
          name: torch-compile-cache
        - mountPath: /.config
          name: vllm-config
        - mountPath: /.triton
          name: triton-cache
      initContainers:
      - args:
        - --port=8000
        - --vllm-port=8200
        - --kv-connector=nixlv2
        - --zap-log-level=1
        - --secure-proxy=false
        image: ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.9.0
        imagePullPolicy: Always
        name: routing-proxy
        ports:
        - containerPort: 8000
          name: sidecar
          protocol: TCP
        resources: {}
        restartPolicy: Always
        securityContext:
          allowPrivilegeEscalation: false
          runAsNonRoot: true
      serviceAccountName: pd-disaggregation-nvidia-gpu-vllm-sa
      volumes:
      - emptyDir:
          medium: Memory
          sizeLimit: 20Gi
        name: shm
      - emptyDir: {}
        name: torch-compile-cache
      - emptyDir: {}
        name: vllm-config
      - emptyDir: {}
        name: triton-cache
`
