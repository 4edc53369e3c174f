package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
)

// The real node runs what modelgate injects in real containers: the
// kubelet and containerd of test/harnesses/cluster, images from the node's registry
// on loopback (the engine's published names answered by the stand-in
// engine, test/standins/engine), each Pod in the node's Pod network (its
// own address on a bridge of this machine only; the servers the loaders
// read listen on the host's address there, cluster.NodeGateway).

// realNode returns the cluster's real node, failing the spec when there is
// none (the suite runs it as root; not root, these specs fail).
func realNode() *cluster.RealNode {
	if gpuCluster.RealNode == nil {
		Fail("the real node did not start: run the e2e suite as root")
	}
	return gpuCluster.RealNode
}

// onRealNode sends a Pod to the real node as a user with a node of their
// own would: the node by name, its taint tolerated.
func onRealNode(spec *corev1.PodSpec) {
	n := realNode()
	spec.NodeSelector = map[string]string{corev1.LabelHostname: n.Name}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: cluster.RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
}

// vllmOptIn is the opt-in of a vLLM server on one GPU whose loader fetches
// model (a URI) with the Secret credentials, with extra annotations on top.
func vllmOptIn(model, credentials string, extra map[string]string) map[string]string {
	a := map[string]string{
		annotations.Inject:           "true",
		annotations.Model:            model,
		annotations.ModelCredentials: credentials,
		annotations.Engine:           "vllm",
		annotations.GPU:              "1",
	}
	maps.Copy(a, extra)
	return a
}

// vllmServe makes c the stand-in vLLM serving model (a Hub id or a path)
// on a free port of the node, as `vllm serve` in vLLM's image.
func vllmServe(c *corev1.Container, model string) {
	c.Image = "vllm/vllm-openai:v0.9.1"
	c.Command = []string{"vllm", "serve", model, "--port", freePort()}
}

// freePort is a free TCP port on 127.0.0.1: an engine's port, any one
// (each Pod has an address of its own), chosen so that no spec relies on
// the engine's default.
func freePort() string {
	addr, err := cluster.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	_, port, err := net.SplitHostPort(addr)
	Expect(err).NotTo(HaveOccurred())
	return port
}

// clientset is the developer's typed client, for logs and exec.
func clientset() *kubernetes.Clientset {
	cs, err := kubernetes.NewForConfig(gpuCluster.Developer)
	Expect(err).NotTo(HaveOccurred())
	return cs
}

// podLogs reads a container's log through the API server (which asks the
// kubelet over TLS), as kubectl logs does.
func podLogs(ctx context.Context, pod *corev1.Pod, container string) string {
	b, err := clientset().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred(), "the log of %s/%s", pod.Name, container)
	return string(b)
}

// execIn runs a command in a running container through the API server, as
// kubectl exec does, and returns its output.
func execIn(ctx context.Context, pod *corev1.Pod, container string, command ...string) string {
	req := clientset().CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container, Command: command, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(gpuCluster.Developer, "GET", req.URL().String())
	Expect(err).NotTo(HaveOccurred())
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut})
	Expect(err).NotTo(HaveOccurred(), "exec %v in %s/%s: %s", command, pod.Name, container, errOut.String())
	return out.String()
}

// readyPod waits until the one Pod labelled app=name is Ready and returns
// it; on failure it shows the Pods' statuses and the namespace's events.
func readyPod(ctx context.Context, namespace, name string, timeout time.Duration) corev1.Pod {
	var pod corev1.Pod
	Eventually(func(g Gomega) {
		pods := podsOf(ctx, g, namespace, name)
		g.Expect(pods).To(HaveLen(1))
		pod = pods[0]
		g.Expect(cluster.PodReady(&pod)).To(BeTrue(), "pod %s is not Ready: %s", pod.Name, describeStatus(&pod))
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return events(ctx, namespace) })
	return pod
}

// describeStatus is a Pod's phase and containers' states in one line.
func describeStatus(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s on %q", p.Status.Phase, p.Spec.NodeName)
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "; %s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
		switch s := cs.State; {
		case s.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s: %s", s.Waiting.Reason, s.Waiting.Message)
		case s.Running != nil:
			b.WriteString(" running")
		case s.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit %d: %s", s.Terminated.Reason, s.Terminated.ExitCode, s.Terminated.Message)
		}
	}
	return b.String()
}

// events lists a namespace's events, oldest first, for a failure message.
func events(ctx context.Context, namespace string) string {
	list := &corev1.EventList{}
	if err := k8s.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return "events: " + err.Error()
	}
	var b strings.Builder
	b.WriteString("events:\n")
	for _, e := range list.Items {
		fmt.Fprintf(&b, "  %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}

// initStatus returns an init container's status.
func initStatus(g Gomega, p *corev1.Pod, name string) corev1.ContainerStatus {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	g.Expect(name).To(BeEmpty(), "pod %s has no status for init container %s", p.Name, name)
	return corev1.ContainerStatus{}
}

// emptyDirOnNode is where the real node's kubelet keeps a Pod's emptyDir
// volume.
func emptyDirOnNode(p *corev1.Pod, volume string) string {
	return filepath.Join(realNode().Dir, "kubelet", "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", volume)
}

// owners counts the files and folders under dir by "uid:gid".
func owners(dir string) map[string]int {
	out := map[string]int{}
	Expect(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		Expect(ok).To(BeTrue())
		out[strconv.FormatUint(uint64(st.Uid), 10)+":"+strconv.FormatUint(uint64(st.Gid), 10)]++
		return nil
	})).To(Succeed())
	return out
}

// podURL is the URL of path on a Pod's port at the Pod's own address,
// which the host reaches over the node's bridge, as the kubelet's probes
// do.
func podURL(pod *corev1.Pod, port, path string) string {
	Expect(pod.Status.PodIP).NotTo(BeEmpty(), "pod %s has no address", pod.Name)
	return "http://" + net.JoinHostPort(pod.Status.PodIP, port) + path
}

// newHub starts a fake Hub where the real node's Pods reach it (the
// host's address on their bridge), stopped after the spec.
func newHub() *hubtest.Server {
	hub := hubtest.New(hubtest.WithHost(cluster.NodeGateway))
	DeferCleanup(hub.Close)
	return hub
}

// httpGet fetches a URL and returns the status code and body.
func httpGet(ctx context.Context, url string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

// processOf finds the process of a Pod's container whose command line
// holds every one of words, by the Pod's cgroup (the kubelet names it
// pod<uid>), and returns its PID.
func processOf(g Gomega, pod types.UID, words ...string) int {
	all, err := cluster.PIDs()
	g.Expect(err).NotTo(HaveOccurred())
	// The cgroupfs driver names the Pod's cgroup pod<uid>.
	want := "pod" + string(pod)
	for _, pid := range all {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !strings.Contains(string(cg), want) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		all := true
		for _, w := range words {
			all = all && slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, w) })
		}
		if all {
			return pid
		}
	}
	g.Expect(words).To(BeEmpty(), "no process of pod %s runs %v", pod, words)
	return 0
}

// routeToRealNode labels a namespace so that its Pods run on the real
// node (test/harnesses/cluster's placement policy: host networking, the node, its
// taint tolerated), as a manifest written for another cluster would be
// sent to a node pool, without a change to the manifest. It returns once
// a dry run shows the placement acting on the namespace's new Pods: the
// API server sees the label through its namespace informer, a moment
// after the update.
func routeToRealNode(ctx context.Context, ns string) {
	GinkgoHelper()
	n := realNode()
	obj := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, obj)).To(Succeed())
	obj.Labels[cluster.RealNodeNamespaceLabel] = cluster.RealNodeRequiredValue
	Expect(k8s.Update(ctx, obj)).To(Succeed())
	Expect(cluster.WaitRequiredPlacement(ctx, k8s, ns, n.Name)).To(Succeed())
}

// localClaim makes a claim bound to a local volume on the real node: a
// root-owned folder of the node's, as a cluster's storage class would
// give a new claim (its root directory owned by root, mode 0755). It
// returns that folder.
func localClaim(ctx context.Context, ns, name, class string) string {
	n := realNode()
	dir := filepath.Join(n.Dir, "local-volumes", ns+"-"+name)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(os.Chmod(dir, 0o755)).To(Succeed())
	DeferCleanup(os.RemoveAll, dir)
	boundClaim(ctx, ns, name, class, corev1.ReadWriteOnce, resource.MustParse("50Gi"), corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{n.Name}}},
		}}}},
	})
	return dir
}
