// Command bench-node measures, on the simulated cluster's real node
// (kubelet, containerd, runc), the time from creating an injected vLLM
// Deployment to its Pod being Ready, split into admission, the
// controllers, scheduling, the sandbox and the loader's image, the
// loader, the engine's image and start, and the engine's readiness; the
// loader's throughput in its container against the same binary loading
// the same model on the host in the same run (the floor `make
// bench-loader` measures); and the kubelet's and containerd's memory,
// idle and after the rounds. The first round pulls the images; the
// others find them on the node. It reports figures and asserts nothing.
// `make bench-node` runs it, as root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
	"github.com/modelgate/modelgate/test/harnesses/cluster"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// repoID is the benchmark's model on the fake Hub.
const repoID = "bench/model"

func main() {
	var (
		binary = flag.String("modelgate", "bin/modelgate", "the modelgate binary (the cluster's webhook, and the host's loader)")
		size   = flag.String("size", "1Gi", "the model's size")
		files  = flag.Int("files", 4, "the model's safetensors shards")
		rounds = flag.Int("rounds", 3, "Deployments created one after another")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *binary, *size, *files, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench-node:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, binary, size string, files, rounds int) error {
	q, err := resource.ParseQuantity(size)
	if err != nil || q.Value() < int64(files)<<20 {
		return fmt.Errorf("--size %q: want a quantity of at least a MiB per file", size)
	}
	if binary, err = filepath.Abs(binary); err != nil {
		return err
	}
	root, err := env.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "bench-node-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	hub := hubtest.New()
	defer hub.Close()
	model := []hubtest.File{{Path: "config.json", Content: loadertest.Bytes([]byte(`{"architectures": ["LlamaForCausalLM"]}`))}}
	for i := range files {
		model = append(model, hubtest.File{
			Path:    fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, files),
			Content: loadertest.Safetensors(uint64(i+1), q.Value()/int64(files)), LFS: true,
		})
	}
	repo := hubtest.OneCommit(model...)
	hub.AddRepo(repoID, repo)
	uri := "hf://" + repoID + "@" + repo.Refs["main"]

	fmt.Println("starting the simulated cluster with its real node ...")
	c, err := cluster.Start(ctx, cluster.Options{
		Root: root, Dir: dir, Modelgate: binary, User: "bench",
		RealNode: cluster.RealNodeOptions{Mode: cluster.RealNodeRequired, Taint: true},
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping:", err)
		}
	}()
	cs, err := kubernetes.NewForConfig(c.Developer)
	if err != nil {
		return err
	}
	idle := memory(c.RealNode.Processes())

	var results []round
	for i := range rounds {
		host, err := hostLoad(ctx, binary, uri, hub.URL(), filepath.Join(dir, fmt.Sprintf("host-%d", i)))
		if err != nil {
			return fmt.Errorf("round %d, the host's load: %w", i+1, err)
		}
		r, err := deploy(ctx, cs, c.RealNode, i, uri, hub.URL(), q)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		r.hostMBps = host
		results = append(results, r)
	}
	report(os.Stdout, q.Value(), files, results, idle, results[len(results)-1].memory)
	return nil
}

// round is one Deployment's timeline, as observed by a watch (offsets
// from just before the create call).
type round struct {
	admitted, podCreated, scheduled, loaderStarted, loaderDone, engineStarted, ready time.Duration
	pulls                                                                            []string // "image in 707ms"
	loaderMBps, hostMBps                                                             float64
	message                                                                          string
	// memory is the node's, with the Pod Ready.
	memory map[string]rss
}

// deploy creates the injected vLLM Deployment in a namespace of its own,
// watches its Pod to Ready, and deletes the namespace.
func deploy(ctx context.Context, cs *kubernetes.Clientset, node *cluster.RealNode, i int, uri, hubURL string, size resource.Quantity) (round, error) {
	var r round
	ns := fmt.Sprintf("bench-node-%d-%d", time.Now().Unix(), i)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	defer deleteNamespace(cs, ns)
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hub"}, StringData: map[string]string{"HF_ENDPOINT": hubURL},
	}, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	port, err := cluster.FreeAddr()
	if err != nil {
		return r, err
	}
	_, port, _ = strings.Cut(port, "127.0.0.1:")
	sizeLimit := size.DeepCopy()
	sizeLimit.Add(resource.MustParse("64Mi"))
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "llm"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "llm"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "llm"}, Annotations: map[string]string{
					annotations.Inject: "true", annotations.Model: uri, annotations.ModelCredentials: "hub",
					annotations.ModelSize: sizeLimit.String(), annotations.Engine: "vllm", annotations.GPU: "1",
				}},
				Spec: corev1.PodSpec{
					HostNetwork:  true,
					NodeSelector: map[string]string{corev1.LabelHostname: node.Name},
					Tolerations:  []corev1.Toleration{{Key: cluster.RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "server", Image: "vllm/vllm-openai:v0.9.1",
						Command: []string{"vllm", "serve", repoID, "--port", port},
					}},
				},
			},
		},
	}
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	defer w.Stop()
	start := time.Now()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	r.admitted = time.Since(start)
	timeout := time.After(5 * time.Minute)
	for r.ready == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return r, fmt.Errorf("the watch of namespace %s ended", ns)
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if msg := observe(&r, p, time.Since(start)); msg != "" {
				return r, fmt.Errorf("pod %s: %s", p.Name, msg)
			}
		case <-timeout:
			return r, fmt.Errorf("no Ready Pod in namespace %s after 5 minutes", ns)
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	r.memory = memory(node.Processes())
	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	pulled := regexp.MustCompile(`^Successfully pulled image "([^"]+)" in (\S+) `)
	for _, e := range events.Items {
		if m := pulled.FindStringSubmatch(e.Message); m != nil {
			r.pulls = append(r.pulls, m[1]+" in "+m[2])
		}
	}
	slices.Sort(r.pulls)
	return r, nil
}

// mbps reads the throughput from a loader's outcome line ("... (392.7
// MB/s), ...").
var mbps = regexp.MustCompile(`\(([0-9.]+) MB/s\)`)

// observe records the first time each step of the Pod's start is seen,
// and returns why the Pod failed, if it did.
func observe(r *round, p *corev1.Pod, at time.Duration) string {
	first := func(d *time.Duration, seen bool) {
		if seen && *d == 0 {
			*d = at
		}
	}
	first(&r.podCreated, true)
	first(&r.scheduled, p.Spec.NodeName != "")
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name != "model-loader" {
			continue
		}
		first(&r.loaderStarted, s.State.Running != nil || s.State.Terminated != nil)
		if t := s.State.Terminated; t != nil {
			if t.ExitCode != 0 {
				return fmt.Sprintf("the loader exited %d: %s", t.ExitCode, t.Message)
			}
			first(&r.loaderDone, true)
			r.message = t.Message
			if m := mbps.FindStringSubmatch(t.Message); m != nil {
				r.loaderMBps, _ = strconv.ParseFloat(m[1], 64)
			}
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		first(&r.engineStarted, s.State.Running != nil)
		if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "CrashLoopBackOff") {
			return w.Reason + ": " + w.Message
		}
	}
	for _, c := range p.Status.Conditions {
		first(&r.ready, c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	return ""
}

// deleteNamespace deletes a round's namespace and waits for its Pods to
// go, so that the next round has the GPU and the port.
func deleteNamespace(cs *kubernetes.Clientset, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	for ctx.Err() == nil {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hostLoad runs the loader on the host, as `make bench-loader` does, into
// dest, and returns its throughput (MB/s, from its outcome line).
func hostLoad(ctx context.Context, binary, uri, hubURL, dest string) (float64, error) {
	defer os.RemoveAll(dest)
	cmd := exec.CommandContext(ctx, binary, "load", "--uri", uri, "--dest", dest) //nolint:gosec // the modelgate binary the operator benchmarks
	cmd.Env = append(os.Environ(), "HF_ENDPOINT="+hubURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	m := mbps.FindAllStringSubmatch(string(out), -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("no throughput in the loader's output: %s", out)
	}
	return strconv.ParseFloat(m[len(m)-1][1], 64)
}

// rss is a process's resident memory now and at its peak (VmRSS, VmHWM),
// in KiB.
type rss struct{ now, peak int64 }

// memory reads the node's processes' memory, and the sum of the Pods'
// shims (containerd-shim-runc-v2, one per Pod; /proc's comm cuts the name
// to containerd-shim).
func memory(procs map[string]int) map[string]rss {
	out := map[string]rss{}
	for name, pid := range procs {
		out[name] = readRSS(pid)
	}
	all, _ := cluster.PIDs()
	var shims rss
	for _, pid := range all {
		if comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm")); err == nil && strings.HasPrefix(string(comm), "containerd-shim") {
			s := readRSS(pid)
			shims.now += s.now
			shims.peak += s.peak
		}
	}
	out["containerd-shims"] = shims
	return out
}

func readRSS(pid int) rss {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return rss{}
	}
	var r rss
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			r.now = n
		case "VmHWM":
			r.peak = n
		}
	}
	return r
}
