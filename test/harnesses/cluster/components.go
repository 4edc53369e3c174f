package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/env"
)

// KwokVersion is the kwok the Makefile builds (hack/kwok/go.mod) into
// bin/kwok/<version>, with its stages in stages.yaml beside it.
const KwokVersion = "v0.8.0"

// FakeNodeAnnotation is the annotation kwok is told to manage nodes by;
// every node the cluster registers carries it.
const FakeNodeAnnotation = "kwok.x-k8s.io/node"

// ErrNoClusterBinaries is returned when kube-scheduler,
// kube-controller-manager or kwok have not been built.
var ErrNoClusterBinaries = errors.New("the simulated cluster's binaries are missing: run `make cluster-tools`")

// binaries are the simulated cluster's programs beyond envtest's.
type binaries struct {
	scheduler, controllerManager, kwok, kwokStages string
}

// findBinaries looks for the programs the Makefile builds: the scheduler
// and controller-manager beside kube-apiserver in bin/k8s/<version>, kwok
// and its stages in bin/kwok/<version>.
func findBinaries(root string) (binaries, error) {
	k8s := filepath.Join(root, "bin", "k8s", env.KubernetesVersion)
	kwok := filepath.Join(root, "bin", "kwok", KwokVersion)
	b := binaries{
		scheduler:         filepath.Join(k8s, "kube-scheduler"),
		controllerManager: filepath.Join(k8s, "kube-controller-manager"),
		kwok:              filepath.Join(kwok, "kwok"),
		kwokStages:        filepath.Join(kwok, "stages.yaml"),
	}
	for _, p := range []string{b.scheduler, b.controllerManager, b.kwok, b.kwokStages} {
		if _, err := os.Stat(p); err != nil {
			return binaries{}, fmt.Errorf("%w (%s not found)", ErrNoClusterBinaries, p)
		}
	}
	return b, nil
}

// schedulerConfig writes the scheduler's KubeSchedulerConfiguration: its
// kubeconfig and client limits, no leader election (one replica).
func schedulerConfig(path, kubeconfig string, qps, burst int) error {
	cfg := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"clientConnection": map[string]any{
			"kubeconfig": kubeconfig,
			"qps":        qps,
			"burst":      burst,
		},
		"leaderElection": map[string]any{"leaderElect": false},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the scheduler's configuration: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// schedulerArgs runs kube-scheduler from its configuration, serving no
// port of its own.
func schedulerArgs(configPath string) []string {
	return []string{"--config=" + configPath, "--secure-port=0", "-v=1"}
}

// controllerManagerArgs runs every default controller with shared
// credentials: the user in the kubeconfig is
// system:kube-controller-manager, which modelgate's Configuration trusts
// as a template-copying controller, as in a cluster. The token controller
// signs with saKey, the API server's service account key, and fills
// Secrets of type kubernetes.io/service-account-token (config/prometheus's
// scraper token), and the root CA publisher puts rootCA, the API
// server's serving CA, in every namespace's kube-root-ca.crt, which a
// Pod's service account volume holds. envtest's API server has no
// ServiceAccount admission, so no Pod gets that volume, unless the real
// node runs (configureAPIServerForPods).
func controllerManagerArgs(kubeconfig, saKey, rootCA string, qps, burst int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=*",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + rootCA,
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps=" + strconv.Itoa(qps),
		"--kube-api-burst=" + strconv.Itoa(burst),
		"-v=1",
	}
}

// kwokArgs makes kwok manage the nodes carrying FakeNodeAnnotation=fake,
// with node leases (so the node lifecycle controller sees them alive, as
// it sees a kubelet) and the stages the Makefile collected: nodes become
// Ready and heartbeat, pods become Running (a Job's then Succeeded), and
// deleted pods go.
func kwokArgs(b binaries, kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--config=" + b.kwokStages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake",
		"--node-lease-duration-seconds=40",
		"--cidr=10.244.0.0/16",
		"--node-ip=10.89.0.1",
	}
}
