package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// nodeRunDir holds the real node's sockets and runtime state: short paths
// (a unix socket's is at most 107 bytes) in the machine's /run, which
// containerd's shims use anyway (/run/containerd/s). Stop removes it.
const nodeRunDir = "/run/modelgate-node"

// containerdPaths are where containerd keeps its state: root (images,
// snapshots: large) in the cluster's folder, state and socket in
// nodeRunDir. cdi is the one folder it reads CDI specs from, which the
// DRA plugin writes (instead of the machine's /etc/cdi and /var/run/cdi).
type containerdPaths struct {
	root, state, socket, config, certsD, cniConf, cdi string
}

func newContainerdPaths(nodeDir string) containerdPaths {
	return containerdPaths{
		root:    filepath.Join(nodeDir, "containerd"),
		state:   filepath.Join(nodeRunDir, "containerd"),
		socket:  filepath.Join(nodeRunDir, "containerd.sock"),
		config:  filepath.Join(nodeDir, "containerd.toml"),
		certsD:  filepath.Join(nodeDir, "certs.d"),
		cniConf: filepath.Join(nodeDir, "cni"),
		cdi:     filepath.Join(nodeDir, cdiSubdir),
	}
}

// containerdConfig is containerd's configuration (version 3): overlayfs,
// runc through the v2 shim with cgroupfs (as the kubelet's cgroupDriver),
// the CRI plugin with the locally built pause image, every registry sent
// to the node's registry (certs.d/_default), the Pod network (CNI),
// CDI specs read from the node's cdi folder only (cdi_spec_dirs;
// containerd 2.4 always has CDI on and ignores enable_cdi), and the
// plugins that would write outside its folders (/opt/containerd) or need
// what this machine lacks turned off. restrict_oom_score_adj: root
// here lacks CAP_SYS_RESOURCE, so the negative oom_score_adj containerd
// gives sandboxes fails ("can't get final child's PID from pipe: EOF");
// restricted, it never goes below its own.
func containerdConfig(p containerdPaths, b nodeBinaries) string {
	q := strconv.Quote
	return `version = 3
root = ` + q(p.root) + `
state = ` + q(p.state) + `
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = ` + q(p.socket) + `

[ttrpc]
  address = ` + q(p.socket+".ttrpc") + `

[debug]
  level = "info"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  image_pull_progress_timeout = "1m"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = ` + q(PauseImage) + `
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = ` + q(p.certsD) + `

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  cdi_spec_dirs = [` + q(p.cdi) + `]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = ` + q(b.runc) + `
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [` + q(b.cniDir) + `]
    conf_dir = ` + q(p.cniConf) + `
    max_conf_num = 1
`
}

// registryHosts is certs.d/_default/hosts.toml: containerd resolves and
// pulls every image, whatever registry its name says, from the node's
// registry over plain HTTP on loopback.
func registryHosts(registry string) string {
	u := strconv.Quote("http://" + registry)
	return "server = " + u + "\n\n[host." + u + "]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n"
}

// writeContainerdConfig writes containerd's configuration, the registry
// hosts and the CNI configuration.
func writeContainerdConfig(p containerdPaths, b nodeBinaries, registry string) error {
	files := map[string]string{
		p.config: containerdConfig(p, b),
		filepath.Join(p.certsD, "_default", "hosts.toml"): registryHosts(registry),
		filepath.Join(p.cniConf, "10-pods.conflist"):      podNetworkConf(),
	}
	if err := os.MkdirAll(p.cdi, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", p.cdi, err)
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// nodeEnv is the environment of the node's processes: the node's binaries
// and the system's on PATH (containerd finds its shim there, the shim
// runc), nothing else of the caller's.
func nodeEnv(b nodeBinaries) []string {
	return []string{"PATH=" + strings.Join([]string{filepath.Dir(b.containerd), filepath.Dir(b.kubelet), systemPath}, ":"), "HOME=/root"}
}
