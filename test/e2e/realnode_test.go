package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/builders"
	"github.com/modelgate/modelgate/test/cluster"
)

var _ = Describe("On the real node", func() {
	It("vLLM serving an hf:// model: the injected loader fills the HF cache in modelgate's image, the engine finds it offline, the probes pass", func(ctx SpecContext) {
		ns := newNamespace(ctx, "real-hf")
		const token = "hf_e2eRealNodeTokenNeverPrinted"
		hub, commit := startHub(token)
		credentials(ctx, ns, "hf-token", map[string]string{"HF_TOKEN": token, "HF_ENDPOINT": hub.URL()})
		port := freePort()

		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", Annotations: map[string]string{
			annotations.Inject:           "true",
			annotations.Model:            "hf://" + tinyLLM + "@" + commit,
			annotations.ModelCredentials: "hf-token",
			annotations.Engine:           "vllm",
			annotations.GPU:              "1",
		}}).(*appsv1.Deployment)
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
		logs := podLogs(ctx, &pod, servingContainer, false)
		Expect(logs).To(ContainSubstring("engine: loaded " + tinyLLM))
		code, body := httpGet(ctx, "http://127.0.0.1:"+port+"/v1/models")
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
