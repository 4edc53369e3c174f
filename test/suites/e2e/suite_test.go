// Package e2e_test proves modelgate end to end on a simulated GPU cluster
// (test/harnesses/cluster): the real kube-apiserver, kube-controller-manager and
// kube-scheduler, kwok playing the kubelets of the fake GPU nodes in
// config/dev/nodes.yaml, and the modelgate binary serving its webhooks as
// its own service account, exactly as `make run` starts them. Workloads go
// in through the API server as a human user would create them; the specs
// then follow them to Pods, nodes and completion.
package e2e_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

var modelgateBinary = flag.String("modelgate", "", "the modelgate binary to run (default: <repo>/bin/modelgate, built by `make build`)")

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "modelgate end to end on a simulated GPU cluster")
}

// developerName is the human the specs act as; it becomes the owner label.
const developerName = "e2e-developer"

// team is the modelgate.io/team label of every namespace the specs make.
const team = "research"

// auditInterval is the simulated cluster's audit.interval: longer than the
// suite.
const auditInterval = 6 * time.Hour

var (
	gpuCluster *cluster.Cluster
	// modelgatePath is the modelgate binary under test (-modelgate, or
	// bin/modelgate).
	modelgatePath string
	// k8s acts as the developer (a cluster admin with a client certificate).
	k8s client.Client
	// nodes are the fake nodes by name.
	nodes map[string]*corev1.Node
	// metricsAddr is where modelgate serves its metrics (plain HTTP on
	// loopback in the simulated cluster).
	metricsAddr string
)

var _ = BeforeSuite(func(ctx SpecContext) {
	// The specs' own clients log through Ginkgo.
	logf.SetLogger(GinkgoLogr)
	root, err := env.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	binary := *modelgateBinary
	if binary == "" {
		binary = filepath.Join(root, "bin", "modelgate")
	}
	_, err = os.Stat(binary)
	Expect(err).NotTo(HaveOccurred(), "the modelgate binary: run `make build` (or `make test-e2e`)")
	modelgatePath, err = filepath.Abs(binary)
	Expect(err).NotTo(HaveOccurred())

	dir, err := os.MkdirTemp("", "modelgate-e2e-")
	Expect(err).NotTo(HaveOccurred())
	started := time.Now()
	metricsAddr, err = cluster.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	// As root, the real node must start (a machine that cannot run it
	// fails the suite, never skips its specs); it carries a taint of its
	// own, so that only the specs written for it land there.
	realNode := cluster.RealNodeOptions{Mode: cluster.RealNodeRequired, Taint: true}
	if os.Geteuid() != 0 {
		realNode.Mode = cluster.RealNodeOff
		AddReportEntry("real node", "not root: the real node's specs fail")
	}
	gpuCluster, err = cluster.Start(ctx, cluster.Options{
		Root: root, Dir: dir, Modelgate: binary, User: developerName, MetricsAddr: metricsAddr, RealNode: realNode,
		// Exceptions that expire within a spec: 5s of clock skew allowed
		// (1m by default).
		Configure: func(c *config.Configuration) {
			c.Policy.Exceptions.ClockSkew = &metav1.Duration{Duration: exceptionClockSkew}
			// The audit runs after each change of the policies in force,
			// which is what the specs wait for; a pass at its interval (10
			// minutes, about a suite's length) could fall inside the audit
			// spec's time of quiet, whatever spec ran before.
			c.Audit.Interval = &metav1.Duration{Duration: auditInterval}
			// Hub models packed by `modelgate pack` (the image volume
			// specs); the node's containerd sends every registry host to
			// its own registry.
			c.Injection.ImageVolumes.HubMirror = hubMirror
		},
	})
	Expect(err).NotTo(HaveOccurred())
	AddReportEntry("cluster start", time.Since(started).Round(time.Millisecond).String())
	DeferCleanup(func() {
		Expect(gpuCluster.Stop()).To(Succeed())
		if gpuCluster.RealNode != nil {
			Expect(gpuCluster.RealNode.Leftovers()).To(BeEmpty(), "what the real node left on the machine")
		}
		Expect(os.RemoveAll(dir)).To(Succeed())
	})

	k8s, err = client.New(gpuCluster.Developer, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	nodes = map[string]*corev1.Node{}
	for _, n := range gpuCluster.Nodes {
		nodes[n.Name] = n
	}
}, NodeTimeout(5*time.Minute))

// Every spec checks that no component died under it, and a failing spec
// points at the components' logs.
var _ = AfterEach(func() {
	select {
	case err := <-gpuCluster.Failed():
		Fail(err.Error())
	default:
	}
	if CurrentSpecReport().Failed() {
		AddReportEntry("component logs", gpuCluster.LogDir)
	}
})

// newNamespace creates a namespace with the team label. After the spec,
// its workloads, Pods and resource claims are deleted and waited for, so
// that their GPUs (a device plugin's, or DRA devices allocated to a claim)
// are free for the next spec, whichever it is, and the namespace is
// deleted (its own deletion, by the namespace controller, takes seconds
// longer and frees nothing more).
func newNamespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels:       map[string]string{annotations.NamespaceTeam: team},
	}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	// With the real node, the API server refuses a Pod until its
	// namespace's default service account exists (ServiceAccount
	// admission), which kube-controller-manager creates a moment after
	// the namespace.
	Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "namespace %s has no default service account", ns.Name)
	DeferCleanup(func(ctx SpecContext) {
		in := client.InNamespace(ns.Name)
		for _, obj := range []client.Object{&batchv1.CronJob{}, &batchv1.Job{}, &appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.ReplicaSet{}, &corev1.Pod{}} {
			Expect(k8s.DeleteAllOf(ctx, obj, in, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, in)).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "the pods of namespace %s are not gone", ns.Name)
		// A Pod's claims go with it, by the resource claim controller, a
		// moment later; until then their devices stay allocated.
		Expect(k8s.DeleteAllOf(ctx, &resourcev1.ResourceClaim{}, in)).To(Succeed())
		Eventually(func(g Gomega) {
			claims := &resourcev1.ResourceClaimList{}
			g.Expect(k8s.List(ctx, claims, in)).To(Succeed())
			g.Expect(claims.Items).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "the resource claims of namespace %s are not gone", ns.Name)
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, ns))).To(Succeed())
	}, NodeTimeout(2*time.Minute))
	return ns.Name
}

// podsOf lists the pods labelled app=name in a namespace.
func podsOf(ctx context.Context, g Gomega, namespace, name string) []corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"app": name})).To(Succeed())
	return list.Items
}

// runningPods waits until exactly n pods labelled app=name run, and returns
// them.
func runningPods(ctx context.Context, namespace, name string, n int) []corev1.Pod {
	var pods []corev1.Pod
	Eventually(func(g Gomega) {
		pods = podsOf(ctx, g, namespace, name)
		g.Expect(pods).To(HaveLen(n))
		for _, p := range pods {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s on %q", p.Name, p.Spec.NodeName)
		}
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	return pods
}

// nodeOf returns the fake node a pod is bound to, failing through g
// (inside Eventually, a pod not bound yet is tried again).
func nodeOf(g Gomega, p *corev1.Pod) *corev1.Node {
	n, ok := nodes[p.Spec.NodeName]
	g.Expect(ok).To(BeTrue(), fmt.Sprintf("pod %s is on %q, not one of the fake nodes", p.Name, p.Spec.NodeName))
	if !ok {
		return &corev1.Node{}
	}
	return n
}
