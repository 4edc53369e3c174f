package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// NodeUnavailableError says in one line why the real node cannot start on
// this machine: what is missing and what to do about it.
type NodeUnavailableError struct {
	// Missing is what the machine lacks, Fix what to do.
	Missing, Fix string
}

func (e *NodeUnavailableError) Error() string { return e.Missing + ": " + e.Fix }

// nodeBinaries are the real node's programs: the kubelet beside
// kube-apiserver, containerd, its shim and the CNI plugins (loopback,
// bridge, host-local) from hack/node, and runc from the system.
type nodeBinaries struct {
	kubelet, containerd, shim, cniDir, runc string
	// images holds the OCI layouts of the images the node runs.
	images string
}

// ContainerdVersion is the containerd the Makefile builds (hack/node/go.mod)
// into bin/node/<version>.
const ContainerdVersion = "v2.4.2"

// nodeLockPath is held while a real node runs: the kubelet's device
// plugin socket, /var/log/containers and the kubepods cgroups are the
// machine's, so there is one real node per machine.
const nodeLockPath = "/run/modelgate-real-node.lock"

// systemPath is the PATH the node's programs run with: the node's own
// binaries, then the system's, where Debian puts runc.
const systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// checkNodeMachine checks what the real node needs of the machine and of
// the build, and returns the binaries; each failure is one
// NodeUnavailableError.
func checkNodeMachine(root string) (nodeBinaries, error) {
	if os.Geteuid() != 0 {
		return nodeBinaries{}, &NodeUnavailableError{"not root", "the real node (kubelet, containerd, runc) needs root; run as root for it (kwok's nodes need nothing)"}
	}
	runc, err := lookPath("runc")
	if err != nil {
		return nodeBinaries{}, &NodeUnavailableError{"no runc on PATH", "install it (`apt-get install -y --no-install-recommends runc`, which `make cluster-tools` runs as root)"}
	}
	if err := hasOverlay(); err != nil {
		return nodeBinaries{}, err
	}
	if err := hasCgroups(); err != nil {
		return nodeBinaries{}, err
	}
	b := builtNodeBinaries(root)
	b.runc = runc
	for _, p := range []string{b.kubelet, b.containerd, b.shim, filepath.Join(b.cniDir, "loopback"), filepath.Join(b.cniDir, "bridge"), filepath.Join(b.cniDir, "host-local")} {
		if _, err := os.Stat(p); err != nil {
			return nodeBinaries{}, &NodeUnavailableError{p + " not built", "run `make cluster-tools`"}
		}
	}
	for _, img := range nodeImageNames {
		if _, err := os.Stat(filepath.Join(b.images, img, "index.json")); err != nil {
			return nodeBinaries{}, &NodeUnavailableError{"image " + img + " not built in " + b.images, "run `make node-images`"}
		}
	}
	if pid := foreignProcess("kubelet", "containerd"); pid != "" {
		return nodeBinaries{}, &NodeUnavailableError{"a kubelet or containerd not started by modelgate runs on this machine (" + pid + ")",
			"the real node would share its sockets and cgroups; stop it, or use kwok's nodes only"}
	}
	return b, nil
}

// builtNodeBinaries are where the Makefile builds the node's binaries and
// images under root (runc, from the system, is not among them).
func builtNodeBinaries(root string) nodeBinaries {
	k8s := filepath.Join(root, "bin", "k8s", env.KubernetesVersion)
	node := filepath.Join(root, "bin", "node", ContainerdVersion)
	return nodeBinaries{
		kubelet:    filepath.Join(k8s, "kubelet"),
		containerd: filepath.Join(node, "containerd"),
		shim:       filepath.Join(node, "containerd-shim-runc-v2"),
		cniDir:     filepath.Join(node, "cni"),
		images:     filepath.Join(root, "bin", "node", "images"),
	}
}

// lookPath finds a program on PATH or in the system's sbin folders, which a
// login shell of a user that is not root may lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range filepath.SplitList(systemPath) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// hasOverlay checks that the kernel has overlayfs, containerd's snapshotter.
func hasOverlay() error {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return &NodeUnavailableError{"cannot read /proc/filesystems (" + err.Error() + ")", "the real node needs a Linux /proc"}
	}
	for line := range strings.Lines(string(b)) {
		if strings.TrimSpace(strings.TrimPrefix(line, "nodev")) == "overlay" {
			return nil
		}
	}
	return &NodeUnavailableError{"the kernel has no overlay file system", "load it (`modprobe overlay`); containerd's overlayfs snapshotter needs it"}
}

// cgroupControllers are the cgroup v1 hierarchies the kubelet needs (on a
// cgroup v2 machine, the unified hierarchy holds them all).
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"}

// hasCgroups checks that the cgroup hierarchies the kubelet manages are
// mounted and writable.
func hasCgroups() error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return writableDir("/sys/fs/cgroup")
	}
	for _, c := range cgroupControllers {
		dir := filepath.Join("/sys/fs/cgroup", c)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			return &NodeUnavailableError{"the cgroup v1 hierarchy " + c + " is not mounted at " + dir, "mount it; the kubelet puts Pods in every hierarchy"}
		}
		if err := writableDir(dir); err != nil {
			return err
		}
	}
	return nil
}

func writableDir(dir string) error {
	if err := syscall.Access(dir, 2); err != nil { // W_OK
		return &NodeUnavailableError{"cannot write " + dir + " (" + err.Error() + ")", "the kubelet creates Pod cgroups there; run where cgroups are writable"}
	}
	return nil
}

// foreignProcess returns "name pid exe" of a running process called one
// of names whose executable is not one the Makefile built (bin/), or "".
func foreignProcess(names ...string) string {
	for _, pid := range pids() {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		comm, err := os.ReadFile(filepath.Join(dir, "comm")) //nolint:gosec // /proc/<pid>/comm of a pid listed in /proc
		if err != nil || !slices.Contains(names, string(bytes.TrimSpace(comm))) {
			continue
		}
		exe, _ := os.Readlink(filepath.Join(dir, "exe"))
		if !strings.Contains(exe, "/bin/k8s/") && !strings.Contains(exe, "/bin/node/") {
			return string(bytes.TrimSpace(comm)) + " " + strconv.Itoa(pid) + " " + exe
		}
	}
	return ""
}

// lockNode takes the machine's real node lock, or says who holds it.
func lockNode() (*os.File, error) {
	f, err := os.OpenFile(nodeLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, &NodeUnavailableError{"cannot open " + nodeLockPath + " (" + err.Error() + ")", "run as root"}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(nodeLockPath)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &NodeUnavailableError{"another real node runs on this machine (process " + strings.TrimSpace(string(holder)) + ")",
				"one machine has one kubelet; stop the other `make run` or e2e suite"}
		}
		return nil, &NodeUnavailableError{"cannot lock " + nodeLockPath + " (" + err.Error() + ")", "run as root"}
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}
