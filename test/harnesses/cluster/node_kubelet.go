package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// kubeletPaths are where the kubelet keeps its state: its root (Pods'
// volumes, which it bind-mounts onto itself), the Pods' logs and the
// volume plugins' folder in the cluster's folder, instead of /var/lib,
// /var/log/pods and /usr/libexec. What it cannot be told to put elsewhere
// (/var/lib/kubelet/device-plugins, /var/log/containers) Stop removes.
type kubeletPaths struct {
	root, podLogs, volumePlugins, config, kubeconfig string
}

func newKubeletPaths(nodeDir string) kubeletPaths {
	return kubeletPaths{
		root:          filepath.Join(nodeDir, "kubelet"),
		podLogs:       filepath.Join(nodeDir, "pod-logs"),
		volumePlugins: filepath.Join(nodeDir, "volume-plugins"),
		config:        filepath.Join(nodeDir, "kubelet.yaml"),
		kubeconfig:    filepath.Join(nodeDir, "kubelet.kubeconfig"),
	}
}

// The kubelet's fixed paths outside its root, which Stop cleans.
const (
	devicePluginDir   = "/var/lib/kubelet/device-plugins"
	containerLogLinks = "/var/log/containers"
)

// kubeletSettings are what the kubelet's configuration is made of beside
// its paths.
type kubeletSettings struct {
	port, healthzPort int
	pki               *nodePKI
	socket            string
	taints            []corev1.Taint
}

// kubeletConfig is the KubeletConfiguration: serving on 127.0.0.1 with the
// node CA's certificate, authenticating kube-apiserver by its client
// certificate and others by token, authorizing through the API server;
// cgroupfs on this machine's cgroup v1 (failCgroupV1: false), swap
// allowed, evictions only near the end of memory and disk, the taints the
// node registers with, Pods synced every 10 seconds, and nothing served
// without authentication.
func kubeletConfig(p kubeletPaths, s kubeletSettings) ([]byte, error) {
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"address":                  "127.0.0.1",
		"port":                     s.port,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              s.healthzPort,
		"tlsCertFile":              s.pki.kubeletCert,
		"tlsPrivateKeyFile":        s.pki.kubeletKey,
		"containerRuntimeEndpoint": "unix://" + s.socket,
		"cgroupDriver":             "cgroupfs",
		"failCgroupV1":             false,
		"failSwapOn":               false,
		"serializeImagePulls":      false,
		"makeIPTablesUtilChains":   false,
		"hairpinMode":              "none",
		"resolvConf":               "/etc/resolv.conf",
		"podLogsDir":               p.podLogs,
		"volumePluginDir":          p.volumePlugins,
		"registerWithTaints":       s.taints,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": s.pki.caFile},
		},
		"authorization": map[string]any{"mode": "Webhook"},
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "nodefs.inodesFree": "1%", "imagefs.available": "1%",
		},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"nodeStatusReportFrequency":   "10s",
		// Secret and ConfigMap volumes follow their objects on each Pod's
		// sync: every 10 seconds instead of every minute, so that a
		// rotated certificate reaches a Pod within seconds, not a minute.
		"syncFrequency": "10s",
	}
	return yaml.Marshal(cfg)
}

// kubeletArgs are the kubelet's flags: its configuration and credentials,
// its root, the Node's name and address (127.0.0.1) and the labels NVIDIA's
// GPU feature discovery would put on it.
func kubeletArgs(p kubeletPaths, name string, labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + labels[k]
	}
	return []string{
		"--config=" + p.config,
		"--kubeconfig=" + p.kubeconfig,
		"--root-dir=" + p.root,
		"--hostname-override=" + name,
		"--node-ip=127.0.0.1",
		"--node-labels=" + strings.Join(pairs, ","),
		"-v=1",
	}
}

// writeKubeletConfig writes the kubelet's configuration.
func writeKubeletConfig(p kubeletPaths, s kubeletSettings) error {
	b, err := kubeletConfig(p, s)
	if err != nil {
		return fmt.Errorf("encoding the kubelet's configuration: %w", err)
	}
	for _, d := range []string{p.root, p.podLogs, p.volumePlugins} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	if err := os.WriteFile(p.config, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", p.config, err)
	}
	return nil
}

// gpuLabels are the labels NVIDIA GPU Feature Discovery sets on a node
// with gpus GPUs of product, memoryMiB each.
func gpuLabels(product string, memoryMiB, gpus int) map[string]string {
	return map[string]string{
		"nvidia.com/gpu.present": "true",
		"nvidia.com/gpu.product": product,
		"nvidia.com/gpu.memory":  strconv.Itoa(memoryMiB),
		"nvidia.com/gpu.count":   strconv.Itoa(gpus),
	}
}
