package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/test/standins/deviceplugin"
	"github.com/modelgate/modelgate/test/standins/draplugin"
)

// RealNodeMode says whether Start starts the real node.
type RealNodeMode int

const (
	// RealNodeOff starts kwok's nodes only.
	RealNodeOff RealNodeMode = iota
	// RealNodeIfPossible starts the real node where the machine allows it
	// (root, runc, overlay, cgroups), and else goes on with kwok's nodes
	// only, saying why in Cluster.RealNodeSkipped: `make run`.
	RealNodeIfPossible
	// RealNodeRequired fails Start when the real node cannot start: the
	// e2e suite as root.
	RealNodeRequired
)

// Labels and taint of the real node.
const (
	// RealNodeLabel is on the real node with the value "real".
	RealNodeLabel = "simulated-cluster.modelgate.io/node"
	// RealNodeTaint keeps Pods that do not tolerate it off the real node
	// (RealNodeOptions.Taint).
	RealNodeTaint = "simulated-cluster.modelgate.io/real-node"
	// NodeLoaderImage is the loader image of the cluster's Configuration
	// when the real node runs: `make node-images`' modelgate image, which
	// the node's registry serves under this name.
	NodeLoaderImage = "ghcr.io/modelgate/modelgate:simulated"
)

// RealNodeOptions configure the real node.
type RealNodeOptions struct {
	Mode RealNodeMode
	// GPUs the device plugin advertises (default 8), of Product (default
	// NVIDIA-H100-80GB-HBM3) with MemoryMiB each (default 81559), as
	// feature discovery labels them.
	GPUs      int
	Product   string
	MemoryMiB int
	// Taint registers the node with RealNodeTaint=true:NoSchedule beside
	// the GPU taint, so that only Pods that ask for it land there.
	Taint bool
	// ModelgateImages are more references the node's registry serves
	// modelgate's image under, beside the loader's (NodeLoaderImage): the
	// chart's and config/default's image, for a cluster that installs
	// modelgate into Pods (InstallNone).
	ModelgateImages []string
}

func (o RealNodeOptions) withDefaults() RealNodeOptions {
	if o.GPUs == 0 {
		o.GPUs = 8
	}
	if o.Product == "" {
		o.Product = "NVIDIA-H100-80GB-HBM3"
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 81559
	}
	return o
}

// RealNode is the cluster's real node: a kubelet and containerd running
// Pods in real containers (runc) on this machine, with host networking,
// GPUs from a device plugin and, the same GPUs, from a DRA kubelet plugin
// (resource claims), and images from a registry on loopback.
type RealNode struct {
	// Name is the Node's name; it resolves to 127.0.0.1.
	Name string
	// Registry is the node's registry (127.0.0.1:port); containerd pulls
	// every image from it, whatever registry the image names.
	Registry string
	// Dir is the node's folder (kubelet root, containerd root), LogDir
	// where kubelet.log and containerd.log are.
	Dir, LogDir string
	// GPUs is how many GPUs the device plugin advertises, and the DRA
	// plugin publishes.
	GPUs int

	opts       RealNodeOptions
	bins       nodeBinaries
	pki        *nodePKI
	footprint  nodeFootprint
	lock       *os.File
	registry   *nodeRegistry
	plugin     *deviceplugin.Plugin
	draPlugin  *draplugin.Plugin
	draLog     *os.File
	kubelet    *process
	container  *process
	stopPlugin context.CancelFunc
	regLog     *os.File
	// containerdArgs and kubeletArgs start the services again (Restart);
	// failed gets their exits nobody asked for; restarts counts Restart's
	// calls, which name the services' new logs.
	containerdArgs, kubeletArgs []string
	containerdSocket            string
	failed                      chan<- error
	restarts                    int
	// stopping is set by Stop: an exit after it is no failure.
	stopping atomic.Bool
}

// uuidPrefix makes the device IDs' prefix of a node name (letters,
// digits and dashes).
func uuidPrefix(node string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, node)
}

// prepareRealNode checks the machine, takes the node lock, removes what a
// node that did not stop cleanly left, and writes the node's certificates,
// before the API server starts (it is told to trust them).
func prepareRealNode(root, dir, logDir string, o RealNodeOptions, te *envtest.Environment) (*RealNode, error) {
	bins, err := checkNodeMachine(root)
	if err != nil {
		return nil, err
	}
	lock, err := lockNode()
	if err != nil {
		return nil, err
	}
	n := &RealNode{
		Name: nodeName(), Dir: filepath.Join(dir, "node"), LogDir: logDir, opts: o.withDefaults(), bins: bins, lock: lock,
	}
	n.GPUs = n.opts.GPUs
	n.footprint = newNodeFootprint(n.Dir, bins)
	if err := n.footprint.clean(); err != nil {
		n.unlock()
		return nil, fmt.Errorf("removing what an earlier real node left: %w", err)
	}
	if n.pki, err = writeNodePKI(filepath.Join(n.Dir, "pki"), n.Name); err != nil {
		n.unlock()
		return nil, err
	}
	configureAPIServerForNode(te, n.pki)
	if err := checkPodNetwork(); err != nil {
		n.unlock()
		return nil, err
	}
	if err := setUpPodBridge(); err != nil {
		n.unlock()
		return nil, err
	}
	configureAPIServerForPods(te)
	return n, nil
}

// nodeName is the machine's host name when it is a valid Node name and
// resolves to a loopback address (kube-apiserver may reach the kubelet by
// it), else localhost.
func nodeName() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	h = strings.ToLower(h)
	if len(validation.IsDNS1123Subdomain(h)) > 0 {
		return "localhost"
	}
	addrs, err := net.LookupHost(h)
	if err != nil || len(addrs) == 0 {
		return "localhost"
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
			return "localhost"
		}
	}
	return h
}

// start starts the registry (with the images pushed), containerd, the
// kubelet and the device plugin, waits until the Node is Ready with its
// GPUs allocatable, then starts the DRA plugin and waits until the
// kubelet has registered it and the node's ResourceSlice is published.
func (n *RealNode) start(ctx context.Context, te *envtest.Environment, admin client.Client, loaderImage string, failed chan<- error) error {
	var err error
	if n.regLog, err = os.OpenFile(filepath.Join(n.LogDir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
		return fmt.Errorf("opening the registry's log: %w", err)
	}
	if n.registry, err = startNodeRegistry(n.regLog); err != nil {
		return err
	}
	n.Registry = n.registry.host
	if err := n.registry.pushNodeImages(ctx, n.bins.images, append([]string{loaderImage}, n.opts.ModelgateImages...)); err != nil {
		return err
	}

	n.failed = failed
	cp := newContainerdPaths(n.Dir)
	if err := writeContainerdConfig(cp, n.bins, n.Registry); err != nil {
		return err
	}
	n.containerdArgs, n.containerdSocket = []string{"--config", cp.config}, cp.socket
	if err := n.startContainerd(ctx, "containerd.log"); err != nil {
		return err
	}

	kp := newKubeletPaths(n.Dir)
	user, err := te.AddUser(envtest.User{Name: "system:node:" + n.Name, Groups: []string{"system:nodes", "system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding the kubelet's user: %w", err)
	}
	if err := WriteKubeconfig(user, kp.kubeconfig); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	taints := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	if n.opts.Taint {
		taints = append(taints, corev1.Taint{Key: RealNodeTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	if err := writeKubeletConfig(kp, kubeletSettings{port: ports[0], healthzPort: ports[1], pki: n.pki, socket: cp.socket, taints: taints}); err != nil {
		return err
	}
	labels := gpuLabels(n.opts.Product, n.opts.MemoryMiB, n.opts.GPUs)
	labels[RealNodeLabel] = "real"
	n.kubeletArgs = kubeletArgs(kp, n.Name, labels)
	if n.kubelet, err = startProcessEnv("kubelet", n.bins.kubelet, n.kubeletArgs,
		nodeEnv(n.bins), filepath.Join(n.LogDir, "kubelet.log"), nil); err != nil {
		return err
	}
	// The plugin lives as long as the node, not as the start's context.
	pluginCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.stopPlugin = cancel
	if n.plugin, err = deviceplugin.Start(pluginCtx, deviceplugin.Options{Devices: n.opts.GPUs, UUIDPrefix: uuidPrefix(n.Name)}); err != nil {
		return err
	}
	if err := n.waitReady(ctx, admin); err != nil {
		return err
	}
	// After the Node exists: the plugin's ResourceSlice is owned by it.
	if err := n.startDRAPlugin(pluginCtx, ctx, kp, cp, labels, user.Config()); err != nil {
		return err
	}
	if err := installRealNodePlacement(ctx, admin, n.Name); err != nil {
		return err
	}
	n.watchServices()
	return nil
}

// startContainerd starts containerd, logging to log in the log folder,
// and waits for its socket.
func (n *RealNode) startContainerd(ctx context.Context, log string) error {
	var err error
	if n.container, err = startProcessEnv("containerd", n.bins.containerd, n.containerdArgs,
		nodeEnv(n.bins), filepath.Join(n.LogDir, log), nil); err != nil {
		return err
	}
	return waitFile(ctx, n.containerdSocket, n.container, startTimeout)
}

// watchServices reports an exit of containerd or the kubelet that neither
// Stop nor Restart asked for on failed.
func (n *RealNode) watchServices() {
	for _, p := range []*process{n.container, n.kubelet} {
		go func() {
			<-p.Exited()
			if !n.stopping.Load() && !p.retired.Load() {
				n.failed <- p.exitError()
			}
		}()
	}
}

// waitReady waits until the Node is Ready and its GPUs are allocatable.
func (n *RealNode) waitReady(ctx context.Context, admin client.Client) error {
	want := resource.MustParse(fmt.Sprint(n.opts.GPUs))
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, startTimeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range []*process{n.container, n.kubelet} {
			select {
			case <-p.Exited():
				return false, p.exitError()
			default:
			}
		}
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			last = "not registered (" + err.Error() + ")"
			return false, nil //nolint:nilerr // polled again; the last state is reported on timeout
		}
		if err := n.setAddresses(ctx, admin, node); err != nil {
			return false, err
		}
		got := node.Status.Allocatable[corev1.ResourceName("nvidia.com/gpu")]
		switch {
		case !NodeReady(node):
			last = "not Ready"
		case got.Cmp(want) != 0:
			last = "allocatable nvidia.com/gpu is " + got.String()
		default:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the real node %s: %s after %s (%w); see %s and %s", n.Name, last, startTimeout, err,
			filepath.Join(n.LogDir, "kubelet.log"), filepath.Join(n.LogDir, "containerd.log"))
	}
	return nil
}

// setAddresses gives the Node its addresses: 127.0.0.1 and its name
// (which resolves to it). The kubelet refuses to report a loopback node IP
// ("nodeIP can't be loopback address") and then leaves the addresses as
// they are, so the ones written here stay: kube-apiserver reaches the
// kubelet (logs, exec) and the kubelet probes host-network Pods at
// 127.0.0.1, and no traffic leaves loopback.
func (n *RealNode) setAddresses(ctx context.Context, admin client.Client, node *corev1.Node) error {
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.Name}}
	if equality.Semantic.DeepEqual(node.Status.Addresses, want) {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Status.Addresses = want
	if err := admin.Status().Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("setting the addresses of node %s: %w", n.Name, err)
	}
	return nil
}

// Stop stops the kubelet, the containers, containerd and the registry,
// unmounts and removes what they made outside the cluster's folder,
// removes the Pod bridge and releases the node lock. It is safe to call
// more than once. A cluster stops the node (stopNode) before its control
// plane and calls Stop after: kube-apiserver listens on the bridge, and
// its shutdown calls itself there.
func (n *RealNode) Stop() error {
	if n == nil || n.lock == nil {
		return nil
	}
	err := n.stopNode()
	err = errors.Join(err, removePodBridge())
	n.unlock()
	return err
}

// stopNode is Stop but for the Pod bridge and the lock; it does its work
// once.
func (n *RealNode) stopNode() error {
	if n == nil || n.lock == nil || n.stopping.Swap(true) {
		return nil
	}
	var errs []error
	if n.draPlugin != nil {
		n.draPlugin.Stop()
	}
	if n.plugin != nil {
		errs = append(errs, n.plugin.Stop())
	}
	if n.stopPlugin != nil {
		n.stopPlugin()
	}
	if n.draLog != nil {
		_ = n.draLog.Close()
	}
	if n.kubelet != nil {
		errs = append(errs, n.kubelet.stop())
	}
	errs = append(errs, n.footprint.clean())
	if n.registry != nil {
		errs = append(errs, n.registry.Close())
	}
	if n.regLog != nil {
		_ = n.regLog.Close()
	}
	return errors.Join(errs...)
}

// Leftovers lists what the node left on the machine after Stop:
// processes, mounts, cgroups and paths. It is empty when Stop was clean.
func (n *RealNode) Leftovers() []string { return n.footprint.leftovers() }

// RealNodeLeftovers lists what the real node of a cluster started in
// another process (`make run`) with Options.Root root and Options.Dir dir
// left on the machine, as Leftovers does.
func RealNodeLeftovers(root, dir string) []string {
	return newNodeFootprint(filepath.Join(dir, "node"), builtNodeBinaries(root)).leftovers()
}

func (n *RealNode) unlock() {
	if n.lock != nil {
		_ = os.Remove(nodeLockPath)
		_ = n.lock.Close()
		n.lock = nil
	}
}

// waitFile waits for a file (a socket) to appear while p runs.
func waitFile(ctx context.Context, path string, p *process, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-p.Exited():
			return false, p.exitError()
		default:
		}
		_, err := os.Stat(path)
		return err == nil, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("%s did not create %s within %s; see %s", p.name, path, timeout, p.log)
	}
	return err
}

// freePorts returns n free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Processes are the node's kubelet and containerd, by name, with their
// process IDs (for a benchmark to read their memory).
func (n *RealNode) Processes() map[string]int {
	out := map[string]int{}
	for _, p := range []*process{n.kubelet, n.container} {
		if p != nil && p.cmd.Process != nil {
			out[p.name] = p.cmd.Process.Pid
		}
	}
	return out
}
