package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// The loader specs run what modelgate injects on the real node: the
// loader in modelgate's image as 65532 with a read-only root, the volumes
// as the kubelet mounts them, the engine (test/standins/engine) reading what the
// loader wrote.
var _ = Describe("The injected model loader, on the real node", func() {
	It("s3 model on a shared cache claim: two Pods on the node, one download, both engines read it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-shared")
		st := startS3()
		objects := map[string][]byte{
			"config.json":               []byte(`{"architectures": ["LlamaForCausalLM"]}`),
			"model.safetensors":         safetensors(7, 3<<20+99),
			"tokenizer/tokenizer.model": generated(8, 200<<10),
		}
		var total int64
		for name, b := range objects {
			st.put("models/tiny/"+name, b)
			total += int64(len(b))
		}
		// A sibling prefix, which s3://bucket/models/tiny must not take.
		st.put("models/tiny-2/config.json", []byte(`{"another": "model"}`))
		st.put("models/tiny-2/model.safetensors", generated(9, 1<<20))
		credentials(ctx, ns, "s3-creds", map[string]string{
			"AWS_ACCESS_KEY_ID": s3KeyID, "AWS_SECRET_ACCESS_KEY": s3Secret,
			"AWS_ENDPOINT_URL_S3": st.srv.URL, "AWS_REGION": "us-east-1",
		})
		claimDir := localClaim(ctx, ns, "model-cache", "")

		var pods []*corev1.Pod
		for _, name := range []string{"tiny-a", "tiny-b"} {
			p := builders.New("Pod", builders.Options{Namespace: ns, Name: name, Annotations: vllmOptIn("s3://"+s3Bucket+"/models/tiny", "s3-creds", map[string]string{annotations.ModelCache: "pvc:model-cache"})}).(*corev1.Pod)
			metav1.SetMetaDataLabel(&p.ObjectMeta, "app", name)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}
			vllmServe(&p.Spec.Containers[0], "/models")
			onRealNode(&p.Spec)
			Expect(k8s.Create(ctx, p)).To(Succeed())
			pods = append(pods, p)
		}

		By("both Pods' loaders run at once, object reads held until one waits for the other")
		Eventually(func(g Gomega) {
			var logs string
			for _, p := range pods {
				got := &corev1.Pod{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
				g.Expect(got.Status.InitContainerStatuses).NotTo(BeEmpty(), describeStatus(got))
				g.Expect(initStatus(g, got, loaderName).State.Running).NotTo(BeNil(), describeStatus(got))
				logs += podLogs(ctx, got, loaderName)
			}
			g.Expect(logs).To(ContainSubstring("waiting for another loader"))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), func() string { return "neither loader waits for the other\n" + events(ctx, ns) })
		st.release()

		var messages []string
		for _, p := range pods {
			pod := readyPod(ctx, ns, p.Name, 2*time.Minute)
			s := initStatus(Default, &pod, loaderName)
			Expect(s.State.Terminated.ExitCode).To(BeZero())
			Expect(s.RestartCount).To(BeZero())
			messages = append(messages, s.State.Terminated.Message)
			logs := podLogs(ctx, &pod, loaderName)
			Expect(logs + s.State.Terminated.Message).NotTo(ContainSubstring(s3Secret))
			Expect(podLogs(ctx, &pod, servingContainer)).To(ContainSubstring("engine: loaded /models"))
		}
		slices.Sort(messages)
		Expect(messages[0]).To(And(HavePrefix("loaded 3 files"), HaveSuffix("verified")))
		Expect(messages[1]).To(HavePrefix("loaded by another Pod sharing the cache: 3 files"))

		By("the objects were served once, and nothing of the sibling prefix")
		Expect(st.servedUnder("models/tiny/")).To(Equal(total))
		Expect(st.servedUnder("models/tiny-2/")).To(BeZero())
		Expect(st.refused()).To(BeZero(), "requests without the Secret's key id")

		By("the claim holds the model once, in its own directory, the loader's files the pod's group's")
		dirs, err := filepath.Glob(filepath.Join(claimDir, "models", "*"))
		Expect(err).NotTo(HaveOccurred())
		Expect(dirs).To(HaveLen(1))
		want := map[string]string{}
		for name, b := range objects {
			want[name] = loadertest.Bytes(b).SHA256()
		}
		Expect(digestsUnder(dirs[0], ".modelgate")).To(Equal(want))
		Expect(owners(dirs[0])).To(HaveKey("65532:65532"))
	}, SpecTimeout(3*time.Minute))

	// As a TGI manifest is written: the model loaded into the claim the
	// server already mounts at /data, rather than into a second copy, the
	// keys under the Secret's own names. The claim is new, so its root
	// directory is root's.
	It("s3 model into the user's own root-owned volume: the fsGroup warning, the load failing without it and succeeding with it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-volume")
		st := startS3()
		st.release()
		for name, b := range map[string][]byte{
			"config.json":       []byte(`{"architectures": ["LlamaForCausalLM"]}`),
			"model.safetensors": safetensors(10, 2<<20+17),
		} {
			st.put("models/tgi/"+name, b)
		}
		credentials(ctx, ns, "s3-keys", map[string]string{
			"access_key": s3KeyID, "secret_key": s3Secret, "AWS_ENDPOINT_URL_S3": st.srv.URL, "AWS_REGION": "us-east-1",
		})
		claimDir := localClaim(ctx, ns, "tgi-cache", "")
		port := freePort()

		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "tgi", Annotations: map[string]string{
			annotations.Inject:               "true",
			annotations.Model:                "s3://" + s3Bucket + "/models/tgi",
			annotations.ModelCredentials:     "s3-keys",
			annotations.ModelCredentialsKeys: "AWS_ACCESS_KEY_ID=access_key,AWS_SECRET_ACCESS_KEY=secret_key",
			annotations.ModelCache:           "volume:data",
			annotations.Engine:               "tgi",
			annotations.GPU:                  "1",
		}}).(*appsv1.Deployment)
		// The old Pod goes before the new one starts: one loader at a
		// time writes into the claim.
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		spec := &d.Spec.Template.Spec
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tgi-cache"}}}}
		spec.Containers[0].Image = "ghcr.io/huggingface/text-generation-inference:3.0"
		spec.Containers[0].Args = []string{"--model-id", "/data", "--num-shard", "1"}
		spec.Containers[0].Env = []corev1.EnvVar{{Name: "PORT", Value: port}}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		onRealNode(spec)
		warned := &env.Warnings{}
		Expect(warningClient(warned).Create(ctx, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Volumes).To(HaveLen(1), "no volume of modelgate's: one copy of the model")
		Expect(warned.Take()).To(ContainElement(And(
			ContainSubstring(`volume "data" (modelgate.io/model-cache: "volume:data") keeps its files' owners and the pod sets no fsGroup`),
			ContainSubstring("set spec.securityContext.fsGroup (65532)"))))

		By("without fsGroup, the loader cannot write into the claim, and says so")
		var failed corev1.ContainerStatus
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "tgi")
			g.Expect(pods).To(HaveLen(1))
			failed = initStatus(g, &pods[0], loaderName)
			t := failed.State.Terminated
			if t == nil {
				t = failed.LastTerminationState.Terminated
			}
			g.Expect(t).NotTo(BeNil(), describeStatus(&pods[0]))
			failed.State.Terminated = t
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
		AddReportEntry("loader without fsGroup", fmt.Sprintf("exit %d: %s", failed.State.Terminated.ExitCode, failed.State.Terminated.Message))
		Expect(failed.State.Terminated.ExitCode).To(BeEquivalentTo(8))
		Expect(failed.State.Terminated.Message).To(And(
			HavePrefix("load failed (not writable): destination /data is not writable by the loader's user 65532"),
			ContainSubstring("(/data is owned by 0:0, mode 0755)"),
			ContainSubstring("spec.securityContext.fsGroup")))
		Expect(failed.State.Terminated.Message).NotTo(ContainSubstring(s3Secret))

		By("with fsGroup 65532, the kubelet gives the claim to the group, and the load succeeds")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
		d.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}
		Expect(warningClient(warned).Update(ctx, d)).To(Succeed())
		Expect(strings.Join(warned.Take(), "\n")).NotTo(ContainSubstring("fsGroup"))
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, ns, "tgi")
			g.Expect(pods).To(HaveLen(1), "the old Pod is gone")
			g.Expect(pods[0].Spec.SecurityContext.FSGroup).NotTo(BeNil())
			g.Expect(cluster.PodReady(&pods[0])).To(BeTrue(), describeStatus(&pods[0]))
			pod = pods[0]
		}).WithContext(ctx).WithTimeout(2*time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
		s := initStatus(Default, &pod, loaderName)
		Expect(s.State.Terminated.Message).To(And(HavePrefix("loaded 2 files"), HaveSuffix("verified")))
		Expect(podLogs(ctx, &pod, servingContainer)).To(ContainSubstring("engine: loaded /data"))
		code, _ := httpGet(ctx, podURL(&pod, port, "/health"))
		Expect(code).To(Equal(200))
		Expect(owners(claimDir)).To(HaveKey("65532:65532"), "the loader's files")
		Expect(st.refused()).To(BeZero(), "the keys under the Secret's own names reached the loader")
	}, SpecTimeout(4*time.Minute))

	It("a native sidecar the loader's endpoint goes through starts, and is started, before the loader", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-sidecar")
		const token = "hf_e2eProxiedTokenNeverPrinted"
		hub, commit := startHub(token)
		proxyPort := freePort()
		// The loader reaches the Hub through the proxy only, at the Pod's
		// own loopback.
		credentials(ctx, ns, "hf-token", map[string]string{"HF_TOKEN": token, "HF_ENDPOINT": "http://127.0.0.1:" + proxyPort})
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "llm", Annotations: vllmOptIn("hf://"+tinyLLM+"@"+commit, "hf-token", nil)}).(*corev1.Pod)
		metav1.SetMetaDataLabel(&p.ObjectMeta, "app", "llm")
		// The proxy listens 3 seconds after it starts; its startup probe
		// tells the kubelet when it does.
		p.Spec.InitContainers = []corev1.Container{{
			Name:          "egress-proxy",
			Image:         "modelgate/test-engine:1",
			Command:       []string{"proxy", "--listen", ":" + proxyPort, "--to", hub.URL(), "--delay", "3s"},
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			StartupProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.Parse(proxyPort)}},
				PeriodSeconds: 1, FailureThreshold: 30,
			},
		}}
		vllmServe(&p.Spec.Containers[0], tinyLLM)
		onRealNode(&p.Spec)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(containerNames(p.Spec.InitContainers)).To(Equal([]string{"egress-proxy", loaderName}), "modelgate puts the loader after the sidecar")

		pod := readyPod(ctx, ns, "llm", 2*time.Minute)
		proxy := initStatus(Default, &pod, "egress-proxy")
		Expect(proxy.State.Running).NotTo(BeNil(), "the sidecar runs beside the engine")
		Expect(proxy.Started).To(HaveValue(BeTrue()))
		loader := initStatus(Default, &pod, loaderName)
		Expect(loader.State.Terminated.ExitCode).To(BeZero())
		Expect(loader.RestartCount).To(BeZero(), "the loader never ran before the proxy listened")

		By("the kubelet started the loader after the proxy's startup probe passed, not when it started")
		proxyLogs := podLogs(ctx, &pod, "egress-proxy")
		m := regexp.MustCompile(`proxy: listening on \S+ at (\S+),`).FindStringSubmatch(proxyLogs)
		Expect(m).To(HaveLen(2), proxyLogs)
		listening, err := time.Parse(time.RFC3339Nano, m[1])
		Expect(err).NotTo(HaveOccurred())
		started := loader.State.Terminated.StartedAt.Time
		// Status times have whole seconds.
		Expect(started).To(BeTemporally(">=", listening.Truncate(time.Second)), "the loader started before the proxy listened")
		Expect(started.Sub(proxy.State.Running.StartedAt.Time)).To(BeNumerically(">=", 2*time.Second),
			"the loader started when the proxy started, not when it was ready")

		By("the loader's requests went through the proxy, which never saw its token in a line it wrote")
		Expect(proxyLogs).To(ContainSubstring("proxy: GET /api/models/" + tinyLLM))
		Expect(proxyLogs).To(ContainSubstring(" 200\n"))
		Expect(proxyLogs).NotTo(ContainSubstring(token))
		Expect(podLogs(ctx, &pod, servingContainer)).To(ContainSubstring("engine: loaded " + tinyLLM))
	}, SpecTimeout(3*time.Minute))

	It("model-cache memory: the loader writes a model larger than its base limit into tmpfs within the raised limit; a model larger than declared is refused at once", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-memory")
		hub := newHub()
		// 2304 MiB: more than the loader's own 2Gi limit (the default
		// Configuration's), which modelgate raises by model-size.
		const shard = 768 << 20
		files := []hubtest.File{{Path: "config.json", Content: loadertest.Bytes([]byte(`{"architectures": ["LlamaForCausalLM"]}`))}}
		for i := range 3 {
			files = append(files, hubtest.File{Path: fmt.Sprintf("model-%05d-of-00003.safetensors", i+1), Content: loadertest.Safetensors(uint64(20+i), shard), LFS: true})
		}
		repo := hubtest.OneCommit(files...)
		hub.AddRepo(tinyLLM, repo)
		credentials(ctx, ns, "hub", map[string]string{"HF_ENDPOINT": hub.URL()})
		pod := func(name, size string) *corev1.Pod {
			p := builders.New("Pod", builders.Options{Namespace: ns, Name: name, Annotations: vllmOptIn("hf://"+tinyLLM+"@"+repo.Refs["main"], "hub", map[string]string{annotations.ModelCache: "memory", annotations.ModelSize: size})}).(*corev1.Pod)
			metav1.SetMetaDataLabel(&p.ObjectMeta, "app", name)
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			vllmServe(&p.Spec.Containers[0], tinyLLM)
			onRealNode(&p.Spec)
			return p
		}

		By("model-size 2400Mi: the loader's limit is 2Gi + 2400Mi, the tmpfs 2400Mi")
		p := pod("fits", "2400Mi")
		Expect(k8s.Create(ctx, p)).To(Succeed())
		loader := container(Default, p.Spec.InitContainers, loaderName)
		limit := loader.Resources.Limits.Memory()
		Expect(limit.String()).To(Equal("4448Mi"))
		got := readyPod(ctx, ns, "fits", 2*time.Minute)
		s := initStatus(Default, &got, loaderName)
		Expect(s.State.Terminated.ExitCode).To(BeZero())
		Expect(s.State.Terminated.Reason).To(Equal("Completed"), "not OOMKilled")
		Expect(s.State.Terminated.Message).To(HavePrefix("loaded 4 files"))
		peak := podMemoryPeak(&got)
		AddReportEntry("memory cache", fmt.Sprintf("a %d MiB model into tmpfs: the Pod's memory peaked at %d MiB under the loader's %s limit; %s",
			3*shard>>20, peak>>20, limit, s.State.Terminated.Message))
		Expect(peak).To(BeNumerically(">=", 3*shard), "the model's pages are charged to the Pod")
		Expect(peak).To(BeNumerically("<", limit.Value()))
		Expect(podLogs(ctx, &got, servingContainer)).To(ContainSubstring("engine: loaded " + tinyLLM))

		By("model-size 1Gi for the same model: the tmpfs is too small, and the loader says so before the first byte")
		served := hub.BytesServed()
		Expect(k8s.Create(ctx, pod("too-small", "1Gi"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "too-small"}, &got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(corev1.PodFailed), describeStatus(&got))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), func() string { return events(ctx, ns) })
		s = initStatus(Default, &got, loaderName)
		AddReportEntry("memory cache too small", s.State.Terminated.Message)
		Expect(s.State.Terminated.ExitCode).To(BeEquivalentTo(6))
		Expect(s.State.Terminated.Reason).To(Equal("Error"), "not OOMKilled")
		Expect(s.State.Terminated.Message).To(ContainSubstring("no space"))
		Expect(hub.BytesServed()-served).To(BeNumerically("<", shard), "the loader fetched the model before finding it had no room")
	}, SpecTimeout(4*time.Minute))
})

// warningClient acts as the developer and hands the API server's
// warnings to w.
func warningClient(w *env.Warnings) client.Client {
	GinkgoHelper()
	cfg := rest.CopyConfig(gpuCluster.Developer)
	cfg.WarningHandlerWithContext = w
	s, err := env.Scheme()
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// containerNames are the names of containers, in order.
func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// podMemoryPeak is the highest memory use of a Pod on the real node so
// far, from its cgroup (v1: memory.max_usage_in_bytes of kubepods/<qos
// class>/pod<uid>; v2: memory.peak), tmpfs pages included.
func podMemoryPeak(p *corev1.Pod) int64 {
	var found []string
	for _, pattern := range []string{
		"/sys/fs/cgroup/memory/kubepods/pod%s/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/memory/kubepods/*/pod%s/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/kubepods/pod%s/memory.peak",
		"/sys/fs/cgroup/kubepods/*/pod%s/memory.peak",
	} {
		m, err := filepath.Glob(fmt.Sprintf(pattern, p.UID))
		Expect(err).NotTo(HaveOccurred())
		found = append(found, m...)
	}
	Expect(found).To(HaveLen(1), "the cgroup of pod %s", p.UID)
	b, err := os.ReadFile(found[0])
	Expect(err).NotTo(HaveOccurred())
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	Expect(err).NotTo(HaveOccurred())
	return n
}

// boundClaim creates a claim of the class, access mode and size and the
// volume (pv: its source and node affinity) bound to it, as a storage
// class would provision it; the volume is deleted after the spec.
func boundClaim(ctx context.Context, ns, name, class string, mode corev1.PersistentVolumeAccessMode, size resource.Quantity, pv corev1.PersistentVolumeSpec) {
	pv.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
	pv.AccessModes = []corev1.PersistentVolumeAccessMode{mode}
	pv.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	pv.StorageClassName = class
	pv.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: name}
	vol := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: pv}
	Expect(k8s.Create(ctx, vol)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { Expect(k8s.Delete(ctx, vol)).To(Succeed()) })
	Expect(k8s.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: &class,
			VolumeName:       vol.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	})).To(Succeed())
}

// generated is n pseudo-random bytes.
func generated(seed uint64, n int64) []byte {
	b := make([]byte, n)
	_, err := loadertest.Generated(seed, n).ReadAt(b, 0)
	Expect(err).NotTo(HaveOccurred())
	return b
}

// safetensors is a valid safetensors file of n bytes, which the engine
// parses.
func safetensors(seed uint64, n int64) []byte {
	c := loadertest.Safetensors(seed, n)
	b := make([]byte, c.Size())
	_, err := c.ReadAt(b, 0)
	Expect(err).NotTo(HaveOccurred())
	return b
}
