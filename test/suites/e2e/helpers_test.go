package e2e_test

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// GPU products of the fake nodes (config/dev/nodes.yaml).
const (
	h100 = "NVIDIA-H100-80GB-HBM3"
	a100 = "NVIDIA-A100-SXM4-40GB"
	t4   = "Tesla-T4"
)

// The names modelgate gives what it injects (docs/injection.md).
const (
	loaderName = "model-loader"
	storeName  = "model-store"
	// servingContainer is the builders' one container.
	servingContainer = "server"
)

// serving is a vLLM server's opt-in: a model, its engine and GPUs, with
// the given annotations on top.
func serving(gpus string, extra map[string]string) map[string]string {
	a := map[string]string{
		annotations.Inject:    "true",
		annotations.Model:     "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
		annotations.ModelSize: "20Gi",
		annotations.Engine:    "vllm",
		annotations.GPU:       gpus,
	}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// templateOf returns a workload's pod template.
func templateOf(obj client.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *batchv1.Job:
		return &o.Spec.Template
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template
	default:
		Fail("templateOf: not a workload")
		return nil
	}
}

// expectInjectedOnce checks a pod a controller made from an injected
// template: it is the template (modelgate did not inject it a second
// time), and the template holds each injected part exactly once.
func expectInjectedOnce(g Gomega, pod *corev1.Pod, tmpl *corev1.PodTemplateSpec, gpus int64) {
	spec := withoutServiceAccountToken(&pod.Spec)
	g.Expect(cmp.Diff(tmpl.Spec.InitContainers, spec.InitContainers)).To(BeEmpty(), "init containers (-template +pod) of %s", pod.Name)
	g.Expect(cmp.Diff(tmpl.Spec.Containers, spec.Containers)).To(BeEmpty(), "containers (-template +pod) of %s", pod.Name)
	g.Expect(cmp.Diff(tmpl.Spec.Volumes, spec.Volumes)).To(BeEmpty(), "volumes (-template +pod) of %s", pod.Name)
	g.Expect(cmp.Diff(tmpl.Spec.Affinity, pod.Spec.Affinity)).To(BeEmpty(), "affinity (-template +pod) of %s", pod.Name)
	g.Expect(pod.Annotations[annotations.Injected]).NotTo(BeEmpty())
	g.Expect(pod.Annotations[annotations.Injected]).To(Equal(tmpl.Annotations[annotations.Injected]), "the injection record of %s", pod.Name)

	g.Expect(named(pod.Spec.InitContainers, loaderName)).To(Equal(1), "model-loader init containers in %s", pod.Name)
	g.Expect(countVolumes(pod.Spec.Volumes, storeName)).To(Equal(1), "model-store volumes in %s", pod.Name)
	c := container(g, pod.Spec.Containers, servingContainer)
	g.Expect(countMounts(c.VolumeMounts, storeName)).To(Equal(1), "model-store mounts in %s", pod.Name)
	g.Expect(c.ReadinessProbe).NotTo(BeNil(), "readiness probe in %s", pod.Name)
	g.Expect(c.StartupProbe).NotTo(BeNil(), "startup probe in %s", pod.Name)
	g.Expect(c.Resources.Limits).To(HaveKey(cluster.ResourceGPU), "GPU limit in %s", pod.Name)
	limit := c.Resources.Limits[cluster.ResourceGPU]
	g.Expect(limit.Value()).To(Equal(gpus), "GPU limit in %s", pod.Name)
	g.Expect(gpuTolerations(pod.Spec.Tolerations)).To(Equal(1), "GPU tolerations in %s", pod.Name)
	g.Expect(pod.Spec.Affinity).NotTo(BeNil())
	terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	g.Expect(terms).To(HaveLen(1))
	g.Expect(expressions(terms[0], cluster.LabelGPUProduct)).To(Equal(1), "product requirements in %s", pod.Name)

	g.Expect(pod.Labels).To(HaveKeyWithValue(annotations.OwnerLabel, developerName), "owner of %s", pod.Name)
	g.Expect(pod.Labels).To(HaveKeyWithValue(annotations.TeamLabel, team), "team of %s", pod.Name)
}

// serviceAccountTokenVolume prefixes the name of the volume the
// ServiceAccount admission plugin adds to every Pod (with the real node,
// the cluster runs it, as any cluster does): the service account's token
// and the API server's CA, mounted into every container.
const serviceAccountTokenVolume = "kube-api-access-"

// withoutServiceAccountToken is a copy of spec without what the
// ServiceAccount admission plugin added: the token's volume and its
// mounts. What remains is what the Pod's template and modelgate made.
func withoutServiceAccountToken(spec *corev1.PodSpec) *corev1.PodSpec {
	out := spec.DeepCopy()
	isToken := func(name string) bool { return strings.HasPrefix(name, serviceAccountTokenVolume) }
	out.Volumes = slices.DeleteFunc(out.Volumes, func(v corev1.Volume) bool { return isToken(v.Name) })
	if len(out.Volumes) == 0 {
		out.Volumes = nil
	}
	for _, cs := range [][]corev1.Container{out.InitContainers, out.Containers} {
		for i := range cs {
			cs[i].VolumeMounts = slices.DeleteFunc(cs[i].VolumeMounts, func(m corev1.VolumeMount) bool { return isToken(m.Name) })
			if len(cs[i].VolumeMounts) == 0 {
				cs[i].VolumeMounts = nil
			}
		}
	}
	return out
}

// expectNotInjected checks that nothing of modelgate's is in a pod.
func expectNotInjected(g Gomega, pod *corev1.Pod) {
	g.Expect(named(pod.Spec.InitContainers, loaderName)).To(BeZero(), "model-loader in %s", pod.Name)
	g.Expect(countVolumes(pod.Spec.Volumes, storeName)).To(BeZero(), "model-store in %s", pod.Name)
	g.Expect(pod.Annotations).NotTo(HaveKey(annotations.Injected), "injection record in %s", pod.Name)
	for _, c := range pod.Spec.Containers {
		g.Expect(c.Resources.Limits).NotTo(HaveKey(cluster.ResourceGPU), "GPU limit in %s", pod.Name)
		g.Expect(c.ReadinessProbe).To(BeNil(), "readiness probe in %s", pod.Name)
		g.Expect(c.StartupProbe).To(BeNil(), "startup probe in %s", pod.Name)
	}
	g.Expect(gpuTolerations(pod.Spec.Tolerations)).To(BeZero(), "GPU toleration in %s", pod.Name)
	g.Expect(pod.Spec.Affinity).To(BeNil(), "affinity in %s", pod.Name)
}

// modelgateKeys returns the keys of m that are modelgate's.
func modelgateKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, annotations.Prefix) {
			keys = append(keys, k)
		}
	}
	return keys
}

// count counts the elements of xs that match.
func count[T any](xs []T, match func(T) bool) int {
	n := 0
	for _, x := range xs {
		if match(x) {
			n++
		}
	}
	return n
}

func named(cs []corev1.Container, name string) int {
	return count(cs, func(c corev1.Container) bool { return c.Name == name })
}

func container(g Gomega, cs []corev1.Container, name string) corev1.Container {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	g.Expect(cs).To(ContainElement(HaveField("Name", name)))
	return corev1.Container{}
}

func countVolumes(vs []corev1.Volume, name string) int {
	return count(vs, func(v corev1.Volume) bool { return v.Name == name })
}

func countMounts(ms []corev1.VolumeMount, name string) int {
	return count(ms, func(m corev1.VolumeMount) bool { return m.Name == name })
}

func gpuTolerations(ts []corev1.Toleration) int {
	return count(ts, func(t corev1.Toleration) bool { return t.Key == string(cluster.ResourceGPU) })
}

func expressions(t corev1.NodeSelectorTerm, key string) int {
	return count(t.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool { return e.Key == key })
}

// modelgateMetric sums the series of a counter or gauge modelgate serves
// whose labels include match; 0 when there is none yet.
func modelgateMetric(ctx context.Context, g Gomega, name string, match map[string]string) float64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return env.SumSeries(fams[name].GetMetric(), match)
}
