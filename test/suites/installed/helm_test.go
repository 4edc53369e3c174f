package installed_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/prometheus"
)

// installNamespace is where the chart is installed, as the README's
// `helm install` puts it.
const installNamespace = "modelgate-system"

// release is the chart's release name.
const release = "modelgate"

// webhookService is the chart's webhook Service.
const webhookService = "modelgate-webhook"

// The two ways the README installs modelgate, one after the other into the
// same namespace.
var _ = Describe("modelgate installed into Pods on the real node", Ordered, func() {
	var (
		workloads string
		hub       *hubtest.Server
	)

	BeforeAll(func(ctx SpecContext) {
		hub = hubtest.New(hubtest.WithHost(cluster.NodeGateway))
		DeferCleanup(hub.Close)
		workloads = teamNamespace(ctx, "workloads")
		// The install namespace sends its Pods to the real node: the only
		// node here that runs containers.
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNamespace,
			Labels: map[string]string{cluster.RealNodeNamespaceLabel: cluster.RealNodeRequiredValue}}}
		Expect(k8s.Create(ctx, ns)).To(Succeed())
		Expect(cluster.WaitRequiredPlacement(ctx, k8s, installNamespace, gpuCluster.RealNode.Name)).To(Succeed())
	})

	Describe("the chart, by helm, with its defaults", Ordered, func() {
		helmSpecs(func() string { return workloads }, func() *hubtest.Server { return hub })
	})

	Describe("config/default, by kustomize", Ordered, func() {
		kustomizeSpecs(func() string { return workloads })
	})
})

// helmSpecs install the chart with helm and operate it.
func helmSpecs(namespace func() string, source func() *hubtest.Server) {
	var (
		workloads string
		// values are the values installed, which an upgrade changes.
		values func(loaderEnv ...any) map[string]any
		// prom runs the Operator's configuration for the chart's
		// monitoring objects.
		prom *prometheus.Server
	)
	BeforeAll(func() { workloads = namespace() })

	It("answers its first review from a Pod soon after helm install, with two replicas Ready on the real node as the chart's service account, serving cert-manager's certificate", func(ctx SpecContext) {
		hub := source()
		// The chart's defaults (cert-manager issues the certificates), and
		// where the loaders find the models: a platform team's mirror.
		values = func(loaderEnv ...any) map[string]any {
			return map[string]any{
				"metrics": monitoringValues,
				"configuration": map[string]any{"injection": map[string]any{"loader": map[string]any{
					"env": append([]any{map[string]any{"name": "HF_ENDPOINT", "value": hub.URL()}}, loaderEnv...),
				}}},
			}
		}
		started := time.Now()
		helm(ctx, "install", release, filepath.Join(root, "charts", "modelgate"), "--namespace", installNamespace, "--values", writeValues(values()))
		var first time.Duration
		eventually(ctx, func(g Gomega) {
			g.Expect(answered(ctx, workloads)).To(Succeed())
		}).Should(Succeed(), func() string { return podsReport(ctx) })
		first = time.Since(started)
		AddReportEntry("helm install to the first answered review", first.Round(100*time.Millisecond).String())

		By("two replicas Ready on the real node, in its Pod network, as the chart's service account")
		pods := readyReplicas(ctx)
		podNet, err := netCIDR(cluster.PodCIDR)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range pods {
			Expect(p.Spec.NodeName).To(Equal(gpuCluster.RealNode.Name))
			Expect(p.Spec.HostNetwork).To(BeFalse())
			Expect(podNet.Contains(ip(p.Status.PodIP))).To(BeTrue(), "pod %s at %s", p.Name, p.Status.PodIP)
			Expect(p.Spec.ServiceAccountName).To(Equal("modelgate"))
			Expect(p.Spec.Containers[0].Image).To(Equal(chartImage))
		}

		By("the webhook configurations call the chart's Service")
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "modelgate-mutating"}, mutating)).To(Succeed())
		for _, w := range mutating.Webhooks {
			Expect(w.ClientConfig.Service).NotTo(BeNil(), w.Name)
			Expect(w.ClientConfig.Service.Namespace + "/" + w.ClientConfig.Service.Name).To(Equal(installNamespace + "/" + webhookService))
		}
		By("cert-manager issued the certificate, its cainjector put the CA in the webhooks and the CRD's conversion, and both replicas serve it")
		expectCertManagerInstall(ctx, pods)
	}, SpecTimeout(5*time.Minute))

	It("is scraped at its Pods' addresses by the Prometheus the Operator configures from the chart's ServiceMonitor, with the shipped token and RBAC, the chart's rules loaded", func(ctx SpecContext) {
		pods := readyReplicas(ctx)
		prom = startPrometheus(ctx)
		targets, err := prom.WaitTargetsUp(ctx, len(pods)+1, 2*time.Minute)
		Expect(err).NotTo(HaveOccurred(), "%+v", targets)
		podNet, err := netCIDR(cluster.PodCIDR)
		Expect(err).NotTo(HaveOccurred())
		scraped := 0
		for _, tg := range targets {
			if tg.Labels["namespace"] != installNamespace {
				continue // the API server's
			}
			u, err := url.Parse(tg.ScrapeURL)
			Expect(err).NotTo(HaveOccurred())
			Expect(podNet.Contains(ip(u.Hostname()))).To(BeTrue(), "target %s is not a Pod's address", tg.ScrapeURL)
			Expect(tg.Labels).To(HaveKey("pod"))
			scraped++
		}
		Expect(scraped).To(Equal(len(pods)), "%+v", targets)
		rules, err := prom.AlertRules(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rules).To(HaveKey("ModelgateWebhookCallFailures"))
		AddReportEntry("the chart's alert rules loaded", fmt.Sprint(len(rules)))
	}, SpecTimeout(4*time.Minute))

	It("loses no admission when cert-manager rotates the certificate, forced by a short renewBefore, under a steady create load", func(ctx SpecContext) {
		pods := readyReplicas(ctx)
		load := startLoad(ctx, workloads)
		settle(ctx, load, 20)
		rotated := time.Now()
		forceRenewal(ctx)
		// The kubelet updates the Pods' Secret volume on its own schedule
		// (about a minute); modelgate then serves the new certificate.
		expectCertManagerInstall(ctx, pods)
		AddReportEntry("the renewed certificate served by both replicas after", time.Since(rotated).Round(time.Second).String())
		settle(ctx, load, 20)
		admitted, failed := report(load, "admissions during the rotation")
		Expect(admitted).To(BeNumerically(">", 0))
		Expect(failed).To(BeEmpty(), "admissions failed during the rotation")
	}, SpecTimeout(5*time.Minute))

	It("answers every admission of the samples from those Pods, which count them", func(ctx SpecContext) {
		pods := readyReplicas(ctx)
		reader := metricsToken(ctx)
		before := reviews(ctx, pods, reader)
		objs := sampleWorkloads(workloads)
		for _, o := range objs {
			Expect(k8s.Create(ctx, o, client.DryRunAll)).To(Succeed(), "%T %s", o, o.GetName())
			Expect(o.GetAnnotations()).To(HaveKey(annotations.Injected), "%T %s: not injected", o, o.GetName())
		}
		after := reviews(ctx, pods, reader)
		var counted float64
		lines := make([]string, 0, len(pods))
		for _, p := range pods {
			counted += after[p.Name] - before[p.Name]
			lines = append(lines, fmt.Sprintf("%s: %.0f", p.Name, after[p.Name]-before[p.Name]))
		}
		AddReportEntry("mutating reviews counted by each replica for the samples", strings.Join(lines, ", "))
		// Each sample is reviewed once, and again where the API server
		// reinvokes the webhook (reinvocationPolicy: IfNeeded).
		Expect(counted).To(BeNumerically(">=", len(objs)), "the replicas counted fewer reviews than the samples made")
	}, SpecTimeout(3*time.Minute))

	It("with both replicas stopped, the API server reports the webhook unreachable for what opted in, and admits what the webhooks leave out", func(ctx SpecContext) {
		scale(ctx, 0)
		eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(installNamespace), client.MatchingLabels{"app.kubernetes.io/name": "modelgate"})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).Should(Succeed())

		var refusal error
		eventually(ctx, func(g Gomega) {
			refusal = k8s.Create(ctx, optedInPod(workloads), client.DryRunAll)
			g.Expect(refusal).To(HaveOccurred())
		}).Should(Succeed())
		AddReportEntry("an opted-in Pod while both replicas are stopped", refusal.Error())
		Expect(refusal.Error()).To(And(
			ContainSubstring(`failed calling webhook "annotation.inject.modelgate.io"`),
			ContainSubstring(webhookService)))
		By("the chart's alert on the API server's failed calls goes pending")
		Expect(prom).NotTo(BeNil(), "the Prometheus spec did not run")
		alertActive(ctx, prom, "ModelgateWebhookCallFailures")

		By("a Pod that did not opt in, and an opted-in Pod in kube-system, are admitted")
		plain := builders.New("Pod", builders.Options{Namespace: workloads, Name: "plain"}).(*corev1.Pod)
		Expect(k8s.Create(ctx, plain, client.DryRunAll)).To(Succeed())
		Expect(k8s.Create(ctx, optedInPod(metav1.NamespaceSystem), client.DryRunAll)).To(Succeed())

		By("scaled back, the replicas answer again")
		scale(ctx, chartReplicas)
		eventually(ctx, func(g Gomega) {
			g.Expect(answered(ctx, workloads)).To(Succeed())
		}).Should(Succeed(), func() string { return podsReport(ctx) })
		readyReplicas(ctx)
	}, SpecTimeout(5*time.Minute))

	It("takes a helm upgrade to a new image and a changed value under a steady create load with no failed admission", func(ctx SpecContext) {
		readyReplicas(ctx)
		load := startLoad(ctx, workloads)
		v := values(map[string]any{"name": "HF_HUB_DOWNLOAD_TIMEOUT", "value": "30"})
		v["image"] = map[string]any{"tag": strings.TrimPrefix(nextImage, "ghcr.io/modelgate/modelgate:")}
		helm(ctx, "upgrade", release, filepath.Join(root, "charts", "modelgate"), "--namespace", installNamespace, "--values", writeValues(v))
		eventually(ctx, func(g Gomega) {
			pods := readyReplicasNow(ctx, g)
			g.Expect(pods).To(HaveLen(chartReplicas))
			for _, p := range pods {
				g.Expect(p.Spec.Containers[0].Image).To(Equal(nextImage))
			}
		}).Should(Succeed(), func() string { return podsReport(ctx) })
		// A moment of load on the new replicas alone.
		settle(ctx, load, 40)
		admitted, failed := report(load, "admissions during helm upgrade")
		Expect(admitted).To(BeNumerically(">", 0))
		Expect(failed).To(BeEmpty(), "admissions failed during the upgrade")

		By("the changed value is in force: the loader gets the new variable")
		p := optedInPod(workloads)
		p.Annotations[annotations.Model] = "hf://acme-ai/tiny-model"
		Expect(k8s.Create(ctx, p, client.DryRunAll)).To(Succeed())
		Expect(p.Spec.InitContainers).NotTo(BeEmpty())
		// The Configuration's loader environment reaches the loader as
		// defaults (MODELGATE_DEFAULT_<name>, docs/loader.md).
		Expect(p.Spec.InitContainers[len(p.Spec.InitContainers)-1].Env).To(ContainElement(corev1.EnvVar{Name: "MODELGATE_DEFAULT_HF_HUB_DOWNLOAD_TIMEOUT", Value: "30"}))
	}, SpecTimeout(5*time.Minute))

	It("loses no admission when one replica is deleted under a steady create load", func(ctx SpecContext) {
		pods := readyReplicas(ctx)
		load := startLoad(ctx, workloads)
		settle(ctx, load, 20)
		Expect(k8s.Delete(ctx, &pods[0])).To(Succeed())
		eventually(ctx, func(g Gomega) {
			now := readyReplicasNow(ctx, g)
			g.Expect(now).To(HaveLen(chartReplicas))
			for _, p := range now {
				g.Expect(p.Name).NotTo(Equal(pods[0].Name))
			}
		}).Should(Succeed(), func() string { return podsReport(ctx) })
		settle(ctx, load, 20)
		admitted, failed := report(load, "admissions while a replica was deleted and replaced")
		Expect(admitted).To(BeNumerically(">", 0))
		Expect(failed).To(BeEmpty(), "admissions failed while a replica was replaced")
	}, SpecTimeout(4*time.Minute))

	DescribeTable("comes back without a hand when the node restarts",
		func(ctx SpecContext, killContainers bool, what string) {
			before := readyReplicas(ctx)
			load := startLoad(ctx, workloads)
			Expect(gpuCluster.RealNode.Restart(ctx, adminClient(), killContainers)).To(Succeed())
			var after []corev1.Pod
			eventually(ctx, func(g Gomega) {
				after = readyReplicasNow(ctx, g)
				g.Expect(after).To(HaveLen(chartReplicas))
				if killContainers {
					// The same Pods, their containers started again by the
					// kubelet.
					for _, p := range after {
						g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">", restarts(before, p.Name)), "pod %s's container was not restarted", p.Name)
					}
				}
			}).Should(Succeed(), func() string { return podsReport(ctx) })
			eventually(ctx, func(g Gomega) {
				g.Expect(answered(ctx, workloads)).To(Succeed())
			}).Should(Succeed())
			settle(ctx, load, 20)
			// Reported, not held to zero: with the containers killed, both
			// replicas are down at once until the kubelet starts them again.
			report(load, "admissions while the node "+what)
		},
		Entry("kubelet and containerd restarted, the containers running on", SpecTimeout(5*time.Minute), false, "restarted its kubelet and containerd"),
		Entry("as after a reboot: every container killed too", SpecTimeout(5*time.Minute), true, "rebooted"),
	)

	AfterAll(func(ctx SpecContext) {
		stopPrometheus(prom)
		helm(ctx, "uninstall", release, "--namespace", installNamespace, "--wait")
		// Its replicas drain before they go: gone, nothing of this install
		// answers what comes after.
		eventually(ctx, func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(installNamespace), client.MatchingLabels{"app.kubernetes.io/name": "modelgate"})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).Should(Succeed())
	})
}

// helm runs the helm binary against the cluster as its administrator.
func helm(ctx context.Context, args ...string) {
	GinkgoHelper()
	cmd := exec.CommandContext(ctx, *helmBinary, append(args, "--kubeconfig", gpuCluster.Kubeconfig)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+GinkgoT().TempDir(), "HELM_CONFIG_HOME="+GinkgoT().TempDir(), "HELM_DATA_HOME="+GinkgoT().TempDir())
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "helm %s:\n%s", strings.Join(args, " "), out)
}

// writeValues writes a values file.
func writeValues(v map[string]any) string {
	GinkgoHelper()
	b, err := yaml.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "values.yaml")
	Expect(os.WriteFile(path, b, 0o600)).To(Succeed())
	return path
}

// teamNamespace creates a namespace with a team, and waits for its
// default service account (the real node's cluster has ServiceAccount
// admission, which refuses Pods until it exists).
func teamNamespace(ctx context.Context, prefix string) string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{annotations.NamespaceTeam: "ml-platform"}}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	eventually(ctx, func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	}).Should(Succeed())
	return ns.Name
}

// optedInPod is a Pod that opts in with a GPU and an engine.
func optedInPod(ns string) *corev1.Pod {
	p := builders.New("Pod", builders.Options{Namespace: ns, Name: "opted-in", Annotations: map[string]string{
		annotations.Inject: "true", annotations.Engine: "vllm", annotations.GPU: "1",
	}}).(*corev1.Pod)
	return p
}

// answered creates an opted-in Pod with a dry run and says whether
// modelgate answered: the Pod came back injected.
func answered(ctx context.Context, ns string) error {
	p := optedInPod(ns)
	if err := k8s.Create(ctx, p, client.DryRunAll); err != nil {
		return err
	}
	if _, ok := p.Annotations[annotations.Injected]; !ok {
		return fmt.Errorf("pod admitted without modelgate's record: %v", p.Annotations)
	}
	return nil
}

// chartReplicas is the chart's default replicas.
const chartReplicas = 2

// readyReplicas waits until the Deployment has the chart's replicas, all
// Ready, and returns their Pods.
func readyReplicas(ctx context.Context) []corev1.Pod {
	const n = chartReplicas
	GinkgoHelper()
	var ready []corev1.Pod
	eventually(ctx, func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: "modelgate"}, d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(n))
		g.Expect(d.Status.Replicas).To(BeEquivalentTo(n), "old replicas are still there")
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(installNamespace), client.MatchingLabels{"app.kubernetes.io/name": "modelgate"})).To(Succeed())
		ready = ready[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && cluster.PodReady(&p) {
				ready = append(ready, p)
			}
		}
		g.Expect(ready).To(HaveLen(n))
	}).Should(Succeed(), func() string { return podsReport(ctx) })
	return ready
}

// readyReplicasNow lists modelgate's Pods that are Ready and not
// terminating, once the Deployment has no others.
func readyReplicasNow(ctx context.Context, g Gomega) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(installNamespace), client.MatchingLabels{"app.kubernetes.io/name": "modelgate"})).To(Succeed())
	var ready []corev1.Pod
	for _, p := range pods.Items {
		g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s is terminating", p.Name)
		if cluster.PodReady(&p) {
			ready = append(ready, p)
		}
	}
	return ready
}

// restarts is the restart count of the named Pod's first container
// among pods.
func restarts(pods []corev1.Pod, name string) int32 {
	for _, p := range pods {
		if p.Name == name && len(p.Status.ContainerStatuses) > 0 {
			return p.Status.ContainerStatuses[0].RestartCount
		}
	}
	return 0
}

// scale sets the Deployment's replicas, as kubectl scale does.
func scale(ctx context.Context, n int32) {
	GinkgoHelper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: installNamespace, Name: "modelgate"}}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
	Expect(k8s.Patch(ctx, d, patch)).To(Succeed())
}

// podsReport describes modelgate's Pods and the install namespace's
// events, for a failed wait.
func podsReport(ctx context.Context) string {
	var b strings.Builder
	pods := &corev1.PodList{}
	_ = k8s.List(ctx, pods, client.InNamespace(installNamespace))
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Message)
		}
		for _, s := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " [%s ready=%t restarts=%d %+v]", s.Name, s.Ready, s.RestartCount, s.State)
		}
		b.WriteString("\n")
	}
	events := &corev1.EventList{}
	_ = k8s.List(ctx, events, client.InNamespace(installNamespace))
	for _, e := range events.Items {
		fmt.Fprintf(&b, "event %s %s: %s %s\n", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}
