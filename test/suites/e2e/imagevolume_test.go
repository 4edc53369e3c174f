package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// hubMirror is the e2e Configuration's injection.imageVolumes.hubMirror.
const hubMirror = "models.modelgate.test/hf"

// registryRequests counts the node registry's requests whose line holds
// every word.
func registryRequests(words ...string) int {
	b, err := os.ReadFile(filepath.Join(realNode().LogDir, "registry.log"))
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			n++
		}
	}
	return n
}

// servingPod is an opted-in stand-in vLLM Pod on the real node serving
// the tiny Hub model on one GPU with `vllm serve acme/tiny-llm`.
func servingPod(ns, name, model string, extra map[string]string) *corev1.Pod {
	a := map[string]string{annotations.Inject: "true", annotations.Model: model, annotations.Engine: "vllm", annotations.GPU: "1"}
	for k, v := range extra {
		a[k] = v
	}
	p := builders.New("Pod", builders.Options{Namespace: ns, Name: name, Annotations: a}).(*corev1.Pod)
	metav1.SetMetaDataLabel(&p.ObjectMeta, "app", name)
	vllmServe(&p.Spec.Containers[0], tinyLLM)
	onRealNode(&p.Spec)
	return p
}

// Issue 31, items 3 and 4: a Hub model packed by `modelgate pack`, mounted
// as an image volume by the real kubelet and containerd.
var _ = Describe("Models as image volumes, on the real node", func() {
	It("serves a Hub model packed into the registry with vllm serve org/model unchanged, and a second Pod pulls nothing", func(ctx SpecContext) {
		n := realNode()
		hub := newHub()
		// tiny-llm with a 256 MiB shard: big enough that fetching it per Pod
		// shows beside mounting what the node has.
		files := tinyLLMFiles()
		files[2].Content = loadertest.Safetensors(42, 256<<20)
		repo := hubtest.OneCommit(files...)
		hub.AddRepo(tinyLLM, repo)
		commit := repo.Refs["main"]
		model := "hf://" + tinyLLM + "@" + commit
		image, err := mutators.HubMirrorImage(n.Registry+"/hf", annotations.ModelURI{Path: tinyLLM, Revision: commit})
		Expect(err).NotTo(HaveOccurred())

		By("packing the model into the node's registry")
		pack := func() (string, time.Duration) {
			cmd := exec.CommandContext(ctx, modelgatePath, "pack", model, image, "--insecure")
			cmd.Env = append(os.Environ(), "HF_ENDPOINT="+hub.URL())
			start := time.Now()
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "modelgate pack:\n%s", out)
			digest := regexp.MustCompile(`@(sha256:[0-9a-f]{64})`).FindStringSubmatch(string(out))
			Expect(digest).NotTo(BeNil(), "modelgate pack printed no digest:\n%s", out)
			return digest[1], time.Since(start)
		}
		digest, packTime := pack()
		again, _ := pack()
		Expect(again).To(Equal(digest), "the same model packs to the same image")
		AddReportEntry("modelgate pack of the Hub model, 256 MiB: load, build, push, verify", packTime.Round(time.Millisecond).String())

		ns := newNamespace(ctx, "imagevol")
		// The loader's way, for the same model, to compare with.
		credentials(ctx, ns, "hub", map[string]string{"HF_ENDPOINT": hub.URL()})
		// timeToReady creates the Pod and waits until it is Ready; it
		// returns the time from its creation to the engine's "loaded" line,
		// by the container log's own timestamp: the readiness probe's
		// period would otherwise round every figure up to 5 s.
		timeToReady := func(p *corev1.Pod) (corev1.Pod, time.Duration) {
			start := time.Now()
			Expect(k8s.Create(ctx, p)).To(Succeed())
			pod := readyPod(ctx, ns, p.Name, 2*time.Minute)
			return pod, loadedAt(ctx, &pod).Sub(start)
		}
		mounted := map[string]string{annotations.ModelMount: string(annotations.DeliveryImageVolume)}
		first, _ := timeToReady(servingPod(ns, "first", model, mounted))
		Expect(first.Spec.InitContainers).To(BeEmpty(), "no loader for an image volume")
		Expect(first.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Image", Equal(&corev1.ImageVolumeSource{
			Reference: hubMirror + "/acme/tiny-llm:" + commit, PullPolicy: corev1.PullIfNotPresent}))))
		Expect(first.Spec.Containers[0].Env).To(ContainElements(
			corev1.EnvVar{Name: mutators.EnvHFHubCache, Value: "/models/.cache/huggingface/hub"},
			corev1.EnvVar{Name: mutators.EnvHFHubOffline, Value: "1"}))
		// The engine resolved acme/tiny-llm in the Hub cache inside the
		// image, read the config and checked every tensor of the shard.
		Expect(podLogs(ctx, &first, first.Spec.Containers[0].Name)).To(MatchRegexp(
			`engine: loaded ` + tinyLLM + ` from /models/\.cache/huggingface/hub/models--acme--tiny-llm/snapshots/` + commit + `: \d+ tensors in 1 files, \d+ bytes, config LlamaForCausalLM`))

		By("a second Pod on the node mounts the image the node has")
		blobs := registryRequests("GET", "/v2/hf/acme/tiny-llm/blobs/")
		manifests := registryRequests("/v2/hf/acme/tiny-llm/manifests/")
		_, second := timeToReady(servingPod(ns, "second", model, mounted))
		Expect(registryRequests("GET", "/v2/hf/acme/tiny-llm/blobs/")).To(Equal(blobs), "the second Pod pulled layers again")
		Expect(registryRequests("/v2/hf/acme/tiny-llm/manifests/")).To(Equal(manifests), "the second Pod asked the registry for the image")

		By("against the loader, which fetches the model for every Pod")
		loaded := map[string]string{annotations.ModelCredentials: "hub"}
		_, _ = timeToReady(servingPod(ns, "loaded-first", model, loaded))
		_, loaderSecond := timeToReady(servingPod(ns, "loaded-second", model, loaded))
		AddReportEntry("time from a second Pod on the node to its engine's model loaded", fmt.Sprintf("image volume %s, loader %s",
			second.Round(time.Millisecond), loaderSecond.Round(time.Millisecond)))
	}, SpecTimeout(6*time.Minute))
})

// loadedAt is when the Pod's engine logged that it loaded the model, by the
// log's own timestamp (the container runtime's clock, this machine's).
func loadedAt(ctx context.Context, pod *corev1.Pod) time.Time {
	b, err := clientset().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: pod.Spec.Containers[0].Name, Timestamps: true,
	}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(b), "\n") {
		stamp, text, ok := strings.Cut(line, " ")
		if ok && strings.HasPrefix(text, "engine: loaded ") {
			t, err := time.Parse(time.RFC3339Nano, stamp)
			Expect(err).NotTo(HaveOccurred())
			return t
		}
	}
	Fail("the engine of " + pod.Name + " logged no \"engine: loaded\" line:\n" + string(b))
	return time.Time{}
}
