package e2e_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/test/builders"
	"github.com/modelgate/modelgate/test/kubelet"
)

// kwok runs no container, so these specs run the model-loader init
// container that modelgate injected into a Pod, admitted through the API
// server, with the kubelet stand-in (test/kubelet): the real modelgate
// binary, with the environment the kubelet would build from the user's
// Secret and the Pod's volumes as host directories, against model servers
// on loopback. Then they look at the files through the serving
// container's mounts and environment, as the engine would.
var _ = Describe("The injected model loader", func() {
	It("hf model: the loader fetches it into the HF cache and vllm serve org/model finds it", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-hf")
		const token = "hf_e2eTokenNeverPrinted"
		hub, commit := startHub(token)
		// As a user of a mirror: the endpoint and the token in the Secret.
		credentials(ctx, ns, "hf-token", map[string]string{"HF_TOKEN": token, "HF_ENDPOINT": hub.URL()})

		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "llm", Annotations: map[string]string{
			annotations.Inject:           "true",
			annotations.Model:            "hf://" + tinyLLM + "@" + commit,
			annotations.ModelCredentials: "hf-token",
			annotations.Engine:           "vllm",
			annotations.GPU:              "1",
		}}).(*appsv1.Deployment)
		d.Spec.Template.Spec.Containers[0].Command = []string{"vllm"}
		d.Spec.Template.Spec.Containers[0].Args = []string{"serve", tinyLLM}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		pod := runningPods(ctx, ns, "llm", 1)[0]

		By("running the Pod's model-loader")
		r, err := runContainer(ctx, &pod, loaderName, kubeletDir(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.ExitCode).To(BeZero(), "output:\n%s", r.Output)
		Expect(r.Message).To(And(HavePrefix("loaded 3 files"), HaveSuffix("verified")))
		loader := container(Default, pod.Spec.InitContainers, loaderName)
		limit := loader.Resources.Limits.Memory()
		Expect(limit.IsZero()).To(BeFalse(), "the loader has no memory limit")
		Expect(r.PeakRSS).To(BeNumerically("<", limit.Value()), "peak RSS %s, limit %s", resource.NewQuantity(r.PeakRSS, resource.BinarySI), limit)
		AddReportEntry("hf loader", r.Duration.Round(time.Millisecond).String()+", peak RSS "+resource.NewQuantity(r.PeakRSS, resource.BinarySI).String())

		By("looking up " + tinyLLM + " offline from the serving container, as huggingface_hub does")
		want := contentDigests(tinyLLMFiles())
		snap, err := kubelet.ResolveHF(&pod, servingContainer, tinyLLM, r)
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Base(snap)).To(Equal(commit))
		Expect(digestsUnder(snap)).To(Equal(want), "the snapshot's files")

		By("reading the plain view at the serving container's model mount")
		serving := container(Default, pod.Spec.Containers, servingContainer)
		i := slices.IndexFunc(serving.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == storeName })
		Expect(i).To(BeNumerically(">=", 0), "the serving container does not mount %s", storeName)
		Expect(serving.VolumeMounts[i].ReadOnly).To(BeTrue())
		plain, err := kubelet.HostPath(&pod, servingContainer, serving.VolumeMounts[i].MountPath, r)
		Expect(err).NotTo(HaveOccurred())
		Expect(digestsUnder(plain, ".modelgate", ".cache")).To(Equal(want), "the files at %s", serving.VolumeMounts[i].MountPath)

		By("the token went to the Hub's API, never to the CDN")
		for _, route := range []hubtest.Route{hubtest.RouteRevision, hubtest.RouteTree, hubtest.RouteResolve} {
			Expect(hub.Authorizations(route)).To(Equal(map[string]int{"Bearer " + token: hub.Requests(route)}), "route %s", route)
		}
		Expect(hub.Requests(hubtest.RouteResolve)).To(BeNumerically(">=", 3))
		Expect(hub.Requests(hubtest.RouteCDN)).To(BeNumerically(">=", 1))
		Expect(hub.Authorizations(hubtest.RouteCDN)).To(Equal(map[string]int{"": hub.Requests(hubtest.RouteCDN)}))
		Expect(string(r.Output) + r.Message).NotTo(ContainSubstring(token))
	}, SpecTimeout(2*time.Minute))

	// The loaders tell each other apart by their Pods' UIDs
	// (MODELGATE_POD_UID, from the downward API), not by host names: where
	// the stand-in cannot give each process its Pod's host name (no UTS
	// namespace without root), they share the machine's, as hostNetwork
	// Pods share the node's, and must still elect one holder.
	It("s3 model on a shared cache claim: two Pods, one download", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-s3")
		st := startS3()
		objects := map[string][]byte{
			"config.json":               []byte(`{"architectures": ["LlamaForCausalLM"]}`),
			"model.safetensors":         generated(7, 3<<20+99),
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
		sharedClaim(ctx, ns, "model-cache")

		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "tiny", Annotations: map[string]string{
			annotations.Inject:           "true",
			annotations.Model:            "s3://" + s3Bucket + "/models/tiny",
			annotations.ModelCache:       "pvc:model-cache",
			annotations.ModelCredentials: "s3-creds",
		}}).(*appsv1.Deployment)
		d.Spec.Replicas = ptr.To[int32](2)
		Expect(k8s.Create(ctx, d)).To(Succeed())
		pods := runningPods(ctx, ns, "tiny", 2)

		By("running both Pods' loaders at once, object reads held until one waits for the other")
		dir := kubeletDir()
		results := make([]*kubelet.Result, len(pods))
		errs := make([]error, len(pods))
		outs := make([]*syncBuffer, len(pods))
		var (
			wg    sync.WaitGroup
			ended atomic.Int32
		)
		for i := range pods {
			outs[i] = &syncBuffer{}
			wg.Go(func() {
				defer ended.Add(1)
				results[i], errs[i] = runContainer(ctx, &pods[i], loaderName, dir, outs[i])
			})
		}
		Eventually(func(g Gomega) {
			out := outs[0].String() + outs[1].String()
			if ended.Load() > 0 {
				StopTrying("a loader ended before the objects were served").Attach("output", out).Now()
			}
			g.Expect(out).To(ContainSubstring("waiting for another loader"))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "neither loader waits for the other")
		st.release()
		wg.Wait()

		var messages []string
		for i, r := range results {
			Expect(errs[i]).NotTo(HaveOccurred())
			Expect(r.ExitCode).To(BeZero(), "pod %s, output:\n%s", pods[i].Name, r.Output)
			if kubelet.CanSetHostname() {
				Expect(r.Hostname).To(Equal(pods[i].Name))
			}
			Expect(r.Message).To(ContainSubstring("verified"))
			Expect(string(r.Output) + r.Message).NotTo(ContainSubstring(s3Secret))
			messages = append(messages, r.Message)
		}
		slices.Sort(messages)
		Expect(messages[0]).To(HavePrefix("loaded 3 files"))
		Expect(messages[1]).To(HavePrefix("loaded by another Pod sharing the cache: 3 files"))

		By("the objects were served once, and nothing of the sibling prefix")
		Expect(st.servedUnder("models/tiny/")).To(Equal(total))
		Expect(st.servedUnder("models/tiny-2/")).To(BeZero())
		Expect(st.refused()).To(BeZero(), "requests without the Secret's key id")

		By("both serving containers see the plain layout, in the one directory of the claim")
		want := map[string]string{}
		for name, b := range objects {
			want[name] = loadertest.Bytes(b).SHA256()
		}
		var hosts []string
		for i := range pods {
			serving := container(Default, pods[i].Spec.Containers, servingContainer)
			j := slices.IndexFunc(serving.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == storeName })
			Expect(j).To(BeNumerically(">=", 0))
			h, err := kubelet.HostPath(&pods[i], servingContainer, serving.VolumeMounts[j].MountPath, results[i])
			Expect(err).NotTo(HaveOccurred())
			Expect(digestsUnder(h, ".modelgate")).To(Equal(want), "pod %s: the files at %s", pods[i].Name, serving.VolumeMounts[j].MountPath)
			hosts = append(hosts, h)
		}
		Expect(hosts[0]).To(Equal(hosts[1]))
		Expect(slices.Collect(maps.Values(results[0].Volumes))).To(ContainElement(HavePrefix(filepath.Join(dir, "claims", ns, "model-cache"))))
	}, SpecTimeout(2*time.Minute))

	// Issue 14, items 5 and 8, as a TGI 70B manifest is written: the
	// token under a key named hf_api_token, mapped to HF_TOKEN, and the
	// model loaded into the claim the server already mounts at /data as its
	// cache, rather than into a second copy.
	It("hf model into the server's own cache claim, with the token under the Secret's own key", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-volume")
		const token = "hf_e2eMappedTokenNeverPrinted"
		hub, commit := startHub(token)
		credentials(ctx, ns, "hf-secret", map[string]string{"hf_api_token": token, "HF_ENDPOINT": hub.URL()})
		sharedClaim(ctx, ns, "tgi-cache")

		d := builders.New("Deployment", builders.Options{Namespace: ns, Name: "tgi", Annotations: map[string]string{
			annotations.Inject:               "true",
			annotations.Model:                "hf://" + tinyLLM + "@" + commit,
			annotations.ModelCredentials:     "hf-secret",
			annotations.ModelCredentialsKeys: "HF_TOKEN=hf_api_token",
			annotations.ModelCache:           "volume:data",
			annotations.Engine:               "tgi",
			annotations.GPU:                  "1",
		}}).(*appsv1.Deployment)
		spec := &d.Spec.Template.Spec
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "tgi-cache"}}}}
		spec.Containers[0].Args = []string{"--model-id", tinyLLM, "--num-shard", "1"}
		spec.Containers[0].Env = []corev1.EnvVar{{Name: "PORT", Value: "8080"}}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Volumes).To(HaveLen(1), "no volume of modelgate's: one copy of the model")
		pod := runningPods(ctx, ns, "tgi", 1)[0]

		By("running the Pod's model-loader")
		dir := kubeletDir()
		r, err := runContainer(ctx, &pod, loaderName, dir, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.ExitCode).To(BeZero(), "output:\n%s", r.Output)
		Expect(r.Message).To(And(HavePrefix("loaded 3 files"), HaveSuffix("verified")))
		Expect(slices.Collect(maps.Values(r.Volumes))).To(ContainElement(HavePrefix(filepath.Join(dir, "claims", ns, "tgi-cache"))))

		By("looking up " + tinyLLM + " offline from the server, through its own mount of the claim")
		snap, err := kubelet.ResolveHF(&pod, servingContainer, tinyLLM, r)
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Base(snap)).To(Equal(commit))
		Expect(digestsUnder(snap)).To(Equal(contentDigests(tinyLLMFiles())))
		Expect(hub.Authorizations(hubtest.RouteRevision)).To(Equal(map[string]int{"Bearer " + token: hub.Requests(hubtest.RouteRevision)}))
		Expect(string(r.Output) + r.Message).NotTo(ContainSubstring(token))
	}, SpecTimeout(2*time.Minute))

	It("a wrong token fails the Pod's init container with a clear message", func(ctx SpecContext) {
		ns := newNamespace(ctx, "loader-denied")
		hub, _ := startHub("hf_theRightToken")
		const wrong = "hf_wrongTokenNeverPrinted"
		credentials(ctx, ns, "hf-token", map[string]string{"HF_TOKEN": wrong, "HF_ENDPOINT": hub.URL()})
		p := builders.New("Pod", builders.Options{Namespace: ns, Name: "llm", Annotations: map[string]string{
			annotations.Inject:           "true",
			annotations.Model:            "hf://" + tinyLLM,
			annotations.ModelCredentials: "hf-token",
		}}).(*corev1.Pod)
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Expect(named(p.Spec.InitContainers, loaderName)).To(Equal(1))

		r, err := runContainer(ctx, p, loaderName, kubeletDir(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.ExitCode).To(Equal(4), "output:\n%s", r.Output)
		Expect(r.Message).To(And(HavePrefix("load failed (access denied)"), ContainSubstring(tinyLLM)))
		Expect(r.Message).To(ContainSubstring("HF_TOKEN"), "the message names where the token comes from")
		Expect(string(r.Output)).NotTo(ContainSubstring(wrong))
		Expect(r.Message).NotTo(ContainSubstring(wrong))
		Expect(hub.Requests(hubtest.RouteCDN)).To(BeZero())
	}, SpecTimeout(time.Minute))
})

// sharedClaim creates a claim and a volume bound to it at once: kwok
// provisions no storage, and a Pod on an unbound claim is never scheduled.
// The stand-in backs the claim with a directory of its own.
func sharedClaim(ctx SpecContext, ns, name string) {
	boundClaim(ctx, ns, name, "", corev1.ReadWriteMany, resource.MustParse("1Gi"), corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/e2e/" + name}},
	})
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
