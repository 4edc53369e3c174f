package e2e_test

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
	"github.com/modelgate/modelgate/controller/aiinference"
	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

var _ = Describe("On the real node", func() {
	It("vLLM serving an hf:// model: the injected loader fills the HF cache in modelgate's image, the engine finds it offline, the probes pass", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-hf")
		const token = "hf_e2eRealNodeTokenNeverPrinted"
		hub, commit := startHub(token)
		credentials(ctx, ns, "hf-token", map[string]string{"HF_TOKEN": token, "HF_ENDPOINT": hub.URL()})
		port := freePort()

		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", Annotations: vllmOptIn("hf://"+tinyLLM+"@"+commit, "hf-token", nil)}).(*appsv1.Deployment)
		spec := &d.Spec.Template.Spec
		spec.Containers[0].Image = "vllm/vllm-openai:v0.9.1"
		spec.Containers[0].Command = []string{"vllm"}
		spec.Containers[0].Args = []string{"serve", tinyLLM, "--port", port}
		onRealNode(spec)
		Expect(k8s.Create(ctx, d)).To(Succeed())

		pod := readyPod(ctx, ns, "llm", 2*time.Minute)
		Expect(pod.Spec.NodeName).To(Equal(realNode().Name))

		By("the loader ran in modelgate's image and said what it loaded")
		loader := container(Default, pod.Spec.InitContainers, loaderName)
		Expect(loader.Image).To(Equal(cluster.NodeLoaderImage))
		st := initStatus(Default, &pod, loaderName)
		Expect(st.State.Terminated).NotTo(BeNil())
		Expect(st.State.Terminated.ExitCode).To(BeZero())
		Expect(st.State.Terminated.Message).To(And(HavePrefix("loaded 3 files"), HaveSuffix("verified")))
		Expect(st.ImageID).NotTo(BeEmpty())
		Expect(owners(emptyDirOnNode(&pod, storeName))).To(HaveKey("65532:65532"), "the loader's files are not its user's")

		By("the engine read the model from the cache, offline, and serves it")
		logs := podLogs(ctx, &pod, servingContainer)
		Expect(logs).To(ContainSubstring("engine: loaded " + tinyLLM))
		Expect(pod.Spec.HostNetwork).To(BeFalse())
		_, pods, err := net.ParseCIDR(cluster.PodCIDR)
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Contains(net.ParseIP(pod.Status.PodIP))).To(BeTrue(), "the Pod's address %s is not its own on the node's bridge (%s)", pod.Status.PodIP, cluster.PodCIDR)
		code, body := httpGet(ctx, podURL(&pod, port, "/v1/models"))
		Expect(code).To(Equal(200))
		Expect(body).To(ContainSubstring(`"id":"` + tinyLLM + `"`))
		serving := pod.Status.ContainerStatuses[0]
		Expect(serving.Started).To(HaveValue(BeTrue()))
		Expect(serving.Ready).To(BeTrue())

		By("the device plugin's GPU is in the engine's environment")
		Expect(execIn(ctx, &pod, servingContainer, "sh", "-c", "echo $NVIDIA_VISIBLE_DEVICES")).To(HavePrefix("GPU-"))
		Expect(logs + st.State.Terminated.Message).NotTo(ContainSubstring(token))
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("On the real node, when things go wrong", func() {
	It("a wrong token: the loader exits 4, the Pod shows Init:Error with the termination message, and the token is nowhere", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-token")
		hub, commit := startHub("hf_theRightToken")
		const wrong = "hf_e2eWrongTokenNeverPrinted"
		credentials(ctx, ns, "hf-token", map[string]string{"HF_TOKEN": wrong, "HF_ENDPOINT": hub.URL()})
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "llm", Annotations: vllmOptIn("hf://"+tinyLLM+"@"+commit, "hf-token", nil)}).(*corev1.Pod)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		vllmServe(&p.Spec.Containers[0], tinyLLM)
		onRealNode(&p.Spec)
		Expect(k8s.Create(ctx, p)).To(Succeed())

		var pod corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), &pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodFailed), describeStatus(&pod))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
		st := initStatus(Default, &pod, loaderName)
		Expect(st.State.Terminated).NotTo(BeNil())
		Expect(st.State.Terminated.ExitCode).To(BeEquivalentTo(4))
		Expect(st.State.Terminated.Reason).To(Equal("Error"), "kubectl get pods shows Init:<reason>")
		Expect(st.State.Terminated.Message).To(ContainSubstring(tinyLLM))
		Expect(pod.Status.ContainerStatuses[0].State.Running).To(BeNil(), "the engine never started")

		By("the token is in no event, log or status")
		status, err := json.Marshal(pod.Status)
		Expect(err).NotTo(HaveOccurred())
		everything := string(status) + events(ctx, ns) + podLogs(ctx, &pod, loaderName)
		Expect(everything).NotTo(ContainSubstring(wrong))
		Expect(everything).NotTo(ContainSubstring("e2eWrongToken"))
	}, SpecTimeout(2*time.Minute))

	It("an image the registry does not have: the Pod shows ErrImagePull, then ImagePullBackOff, with the image's name", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-image")
		const image = "nvcr.io/acme/not-pushed:1.0"
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "missing-image"}).(*corev1.Pod)
		p.Spec.Containers[0].Image = image
		onRealNode(&p.Spec)
		// Not opted in: the GPU taint is the Pod's to tolerate.
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		Expect(k8s.Create(ctx, p)).To(Succeed())
		seen := map[string]string{}
		Eventually(func(g Gomega) {
			var pod corev1.Pod
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), &pod)).To(Succeed())
			g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1), describeStatus(&pod))
			if w := pod.Status.ContainerStatuses[0].State.Waiting; w != nil && w.Reason != "ContainerCreating" {
				seen[w.Reason] = w.Message
			}
			g.Expect(seen).To(HaveKey("ImagePullBackOff"))
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(seen["ImagePullBackOff"]).To(ContainSubstring(image))
		Expect(events(ctx, ns)).To(And(ContainSubstring("Failed to pull image \""+image+"\""), ContainSubstring("ErrImagePull")))
	}, SpecTimeout(2*time.Minute))

	It("a Pod bound to the node past the scheduler, asking for more GPUs than the device plugin has: the kubelet refuses it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-overask")
		n := realNode()
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "greedy"}).(*corev1.Pod)
		p.Spec.NodeName = n.Name
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		vllmServe(&p.Spec.Containers[0], tinyLLM)
		gpus := resource.MustParse(fmt.Sprint(n.GPUs + 1))
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": gpus}
		Expect(k8s.Create(ctx, p)).To(Succeed())
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), &pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodFailed), describeStatus(&pod))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
		AddReportEntry("the kubelet's refusal", pod.Status.Reason+": "+pod.Status.Message)
		// The device manager's allocation, not the scheduler's fit, refuses it.
		Expect(pod.Status.Reason).To(Equal("UnexpectedAdmissionError"))
		Expect(pod.Status.Message).To(ContainSubstring(fmt.Sprintf("devices unavailable for nvidia.com/gpu. Requested: %d, Available: %d", n.GPUs+1, n.GPUs)))
		Expect(pod.Status.ContainerStatuses).To(Or(BeEmpty(), HaveEach(HaveField("State.Running", BeNil()))), "nothing ran")
	}, SpecTimeout(2*time.Minute))

	It("the loader killed mid-download: the kubelet restarts it and the load resumes, fetching less than the whole model again", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-kill")
		hub := newHub()
		const size = 48 << 20
		repo := hubtest.OneCommit(
			hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte(`{"architectures": ["LlamaForCausalLM"]}`))},
			hubtest.File{Path: "model.safetensors", Content: loadertest.Safetensors(11, size), LFS: true},
		)
		hub.AddRepo(tinyLLM, repo)
		// 8 MiB/s: six seconds for the shard, time to kill the loader in
		// its middle.
		hub.SetRate(8 << 20)
		credentials(ctx, ns, "hub", map[string]string{"HF_ENDPOINT": hub.URL()})
		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", Annotations: vllmOptIn("hf://"+tinyLLM+"@"+repo.Refs["main"], "hub", nil)}).(*appsv1.Deployment)
		vllmServe(&d.Spec.Template.Spec.Containers[0], tinyLLM)
		onRealNode(&d.Spec.Template.Spec)
		Expect(k8s.Create(ctx, d)).To(Succeed())

		By("killing the loader's process once it has checkpointed a part of the shard")
		var pid int
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "llm")
			g.Expect(pods).To(HaveLen(1))
			// The loader checkpoints every 32 MiB written or 2 seconds
			// (docs/loader.md): a kill before the first loses the part.
			partial, err := filepath.Glob(filepath.Join(emptyDirOnNode(&pods[0], storeName), loader.StateDir, "partial", "*.json"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(partial).NotTo(BeEmpty(), "no checkpoint yet")
			// The first checkpoint may hold nothing yet (written as the
			// download starts): wait for one that holds bytes.
			g.Expect(checkpointed(g, partial[0])).To(BeNumerically(">", 0), "the checkpoint holds no bytes yet")
			pid = processOf(g, pods[0].UID, "/modelgate", "load")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
		Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
		servedAtKill := hub.BytesServed()
		Expect(servedAtKill).To(BeNumerically("<", size), "the download ended before the kill")
		hub.SetRate(0)

		pod := readyPod(ctx, ns, "llm", 2*time.Minute)
		st := initStatus(Default, &pod, loaderName)
		Expect(st.RestartCount).To(BeEquivalentTo(1), "the kubelet restarted the loader once")
		Expect(st.LastTerminationState.Terminated).NotTo(BeNil())
		Expect(st.LastTerminationState.Terminated.ExitCode).To(BeEquivalentTo(137), "killed by SIGKILL")
		Expect(st.State.Terminated.ExitCode).To(BeZero())
		again := hub.BytesServed() - servedAtKill
		AddReportEntry("resumed load", fmt.Sprintf("%d MiB served before the kill, %d MiB after, of a %d MiB model", servedAtKill>>20, again>>20, size>>20))
		Expect(again).To(BeNumerically("<", size), "the restarted loader fetched the whole model again")
		Expect(podLogs(ctx, &pod, servingContainer)).To(ContainSubstring("engine: loaded " + tinyLLM))
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("On the real node, unchanged", func() {
	It("vLLM's own Kubernetes example (/bin/sh -c \"vllm serve ...\", its cache volume, probes and GPU limits), opted in with its annotations alone, in the node's Pod network", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-published")
		routeToRealNode(ctx, ns)
		const model = "mistralai/Mistral-7B-Instruct-v0.3"
		hub := newHub()
		repo := hubtest.OneCommit(
			hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte(`{"architectures": ["MistralForCausalLM"]}`))},
			hubtest.File{Path: "model.safetensors", Content: loadertest.Safetensors(12, 2<<20), LFS: true},
		)
		repo.Private, repo.Tokens = true, []string{"hf_publishedToken"}
		hub.AddRepo(model, repo)
		localClaim(ctx, ns, "mistral-7b", "default")

		var objs []client.Object
		for _, doc := range strings.Split(publishedVLLM, "\n---\n") {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
			u.SetNamespace(ns)
			objs = append(objs, u)
		}
		// The Secret the example asks for holds the token; the mirror's
		// address is the user's own, in the Secret modelgate is told of.
		credentials(ctx, ns, "hub-mirror", map[string]string{"HF_TOKEN": "hf_publishedToken", "HF_ENDPOINT": hub.URL()})
		dep := objs[1].(*unstructured.Unstructured)
		Expect(dep.GetKind()).To(Equal("Deployment"))
		// The opt-in, on the pod template: nothing else.
		Expect(unstructured.SetNestedStringMap(dep.Object, vllmOptIn("hf://"+model+"@"+repo.Refs["main"], "hub-mirror", nil), "spec", "template", "metadata", "annotations")).To(Succeed())
		for _, o := range objs {
			Expect(k8s.Create(ctx, o)).To(Succeed(), "%s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
		}

		pod := readyPod(ctx, ns, "mistral-7b", 3*time.Minute)
		Expect(pod.Spec.NodeName).To(Equal(realNode().Name))

		By("what the example wrote is still there, as written")
		c := container(Default, pod.Spec.Containers, "mistral-7b")
		Expect(c.Command).To(Equal([]string{"/bin/sh", "-c"}))
		Expect(c.Args).To(Equal([]string{"vllm serve " + model + " --trust-remote-code --enable-chunked-prefill --max_num_batched_tokens 1024"}))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/health"))
		Expect(c.LivenessProbe.InitialDelaySeconds).To(BeEquivalentTo(60))
		Expect(c.ReadinessProbe.InitialDelaySeconds).To(BeEquivalentTo(60))
		Expect(c.Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value()).To(BeEquivalentTo(1))
		Expect(c.Resources.Limits.Cpu().String()).To(Equal("10"))
		Expect(c.Ports).To(ConsistOf(HaveField("ContainerPort", BeEquivalentTo(8000))))
		Expect(countMounts(c.VolumeMounts, "cache-volume")).To(Equal(1))
		Expect(countMounts(c.VolumeMounts, "shm")).To(Equal(1))

		By("the loader fetched the model; the engine, started by /bin/sh, found it offline and serves on 8000")
		st := initStatus(Default, &pod, loaderName)
		Expect(st.State.Terminated.ExitCode).To(BeZero())
		Expect(podLogs(ctx, &pod, "mistral-7b")).To(ContainSubstring("engine: loaded " + model))
		Expect(pod.Spec.HostNetwork).To(BeFalse(), "the example's Pod in its own network namespace")
		code, body := httpGet(ctx, podURL(&pod, "8000", "/v1/models"))
		Expect(code).To(Equal(200))
		Expect(body).To(ContainSubstring(model))
	}, SpecTimeout(4*time.Minute))

	It("an AIInference whose Pod runs there is Ready because its engine is, and Failed with the loader's message when the model is missing", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-aii")
		routeToRealNode(ctx, ns)
		s, err := env.Scheme()
		Expect(err).NotTo(HaveOccurred())
		ai, err := client.New(gpuCluster.Developer, client.Options{Scheme: s})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(ai.DeleteAllOf(ctx, &servingv1.AIInference{}, client.InNamespace(ns))).To(Succeed())
		})
		hub, commit := startHub("hf_aiiToken")
		credentials(ctx, ns, "hub", map[string]string{"HF_TOKEN": "hf_aiiToken", "HF_ENDPOINT": hub.URL()})
		inference := func(name, repo, revision string) *servingv1.AIInference {
			return &servingv1.AIInference{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: servingv1.AIInferenceSpec{
					Model: servingv1.ModelSpec{URI: "hf://" + repo, Revision: revision,
						CredentialsSecretRef: &servingv1.SecretReference{Name: "hub"}},
					Engine: servingv1.EngineSpec{Name: servingv1.EngineVLLM},
					GPU:    &servingv1.GPUSpec{Count: 1},
				},
			}
		}
		Expect(ai.Create(ctx, inference("tiny", tinyLLM, commit))).To(Succeed())
		got := &servingv1.AIInference{}
		Eventually(func(g Gomega) {
			g.Expect(ai.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tiny"}, got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhaseReady), "conditions: %+v", got.Status.Conditions)
		}).WithContext(ctx).WithTimeout(2*time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{annotations.InferenceLabel: "tiny"})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		Expect(pods.Items[0].Spec.NodeName).To(Equal(realNode().Name))
		Expect(podLogs(ctx, &pods.Items[0], aiinference.ServingContainer)).To(ContainSubstring("engine: loaded " + tinyLLM))
		Expect(ai.Delete(ctx, got)).To(Succeed())

		By("a model that is not on the Hub")
		Expect(ai.Create(ctx, inference("missing", "acme/no-such-model", commit))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ai.Get(ctx, client.ObjectKey{Namespace: ns, Name: "missing"}, got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(servingv1.PhaseFailed), "conditions: %+v", got.Status.Conditions)
			g.Expect(fmt.Sprint(got.Status.Conditions)).To(ContainSubstring("acme/no-such-model"))
		}).WithContext(ctx).WithTimeout(2*time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
	}, SpecTimeout(4*time.Minute))
})

// publishedVLLM is vLLM's own Kubernetes example for NVIDIA GPUs
// (docs/deployment/k8s.md, "Deployment with GPUs"), as published: its
// Secret and Deployment. Its PVC is made by localClaim, as a cluster's
// storage class would.
const publishedVLLM = `apiVersion: v1
kind: Secret
metadata:
  name: hf-token-secret
  namespace: default
type: Opaque
stringData:
  token: "REPLACE_WITH_TOKEN"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: mistral-7b
  namespace: default
  labels:
    app: mistral-7b
spec:
  replicas: 1
  selector:
    matchLabels:
      app: mistral-7b
  template:
    metadata:
      labels:
        app: mistral-7b
    spec:
      volumes:
      - name: cache-volume
        persistentVolumeClaim:
          claimName: mistral-7b
      # vLLM needs to access the host's shared memory for tensor parallel inference.
      - name: shm
        emptyDir:
          medium: Memory
          sizeLimit: "2Gi"
      containers:
      - name: mistral-7b
        image: vllm/vllm-openai:latest
        command: ["/bin/sh", "-c"]
        args: [
          "vllm serve mistralai/Mistral-7B-Instruct-v0.3 --trust-remote-code --enable-chunked-prefill --max_num_batched_tokens 1024"
        ]
        env:
        - name: HUGGING_FACE_HUB_TOKEN
          valueFrom:
            secretKeyRef:
              name: hf-token-secret
              key: token
        ports:
        - containerPort: 8000
        resources:
          limits:
            cpu: "10"
            memory: 20G
            nvidia.com/gpu: "1"
          requests:
            cpu: "2"
            memory: 6G
            nvidia.com/gpu: "1"
        volumeMounts:
        - mountPath: /root/.cache/huggingface
          name: cache-volume
        - name: shm
          mountPath: /dev/shm
        livenessProbe:
          httpGet:
            path: /health
            port: 8000
          initialDelaySeconds: 60
          periodSeconds: 10
        readinessProbe:
          httpGet:
            path: /health
            port: 8000
          initialDelaySeconds: 60
          periodSeconds: 5
`

// checkpointed is how many bytes of the shard a loader checkpoint
// (loader/checkpoint.go) holds on disk: whole parts and parts' prefixes.
func checkpointed(g Gomega, path string) int64 {
	b, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	var c struct {
		Size     int64            `json:"size"`
		PartSize int64            `json:"partSize"`
		Done     []byte           `json:"done"`
		Partial  map[string]int64 `json:"partial"`
	}
	g.Expect(json.Unmarshal(b, &c)).To(Succeed())
	var n int64
	for _, d := range c.Done {
		n += int64(bits.OnesCount8(d)) * c.PartSize
	}
	for _, p := range c.Partial {
		n += p
	}
	return n
}
