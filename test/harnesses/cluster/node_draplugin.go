package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/modelgate/modelgate/test/standins/dradriver"
	"github.com/modelgate/modelgate/test/standins/draplugin"
)

// cdiSubdir is the node's folder of CDI specs: the DRA plugin writes
// them, containerd reads them (cdi_spec_dirs), and Stop removes it.
const cdiSubdir = "cdi"

// draPluginLogVerbosity is how much of the DRA plugin's and its helper's
// log goes to draplugin.log: registration, publishing, every prepare and
// unprepare, not every gRPC message.
const draPluginLogVerbosity = 3

// startDRAPlugin starts the stand-in for NVIDIA's DRA kubelet plugin as
// the node's own user, publishing the node's GPUs as dradriver publishes
// the fake nodes' (labels are the node's GPU Feature Discovery labels),
// and waits until the kubelet has registered it and its ResourceSlice is
// published. The plugin lives as long as pluginCtx; start's ctx bounds
// the wait. Its log goes to draplugin.log.
func (n *RealNode) startDRAPlugin(pluginCtx, ctx context.Context, kp kubeletPaths, cp containerdPaths, labels map[string]string, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("a client for the DRA plugin: %w", err)
	}
	if n.draLog, err = os.OpenFile(filepath.Join(n.LogDir, "draplugin.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
		return fmt.Errorf("opening the DRA plugin's log: %w", err)
	}
	var mu sync.Mutex
	f := n.draLog
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: draPluginLogVerbosity})
	if n.draPlugin, err = draplugin.Start(pluginCtx, draplugin.Options{
		NodeName:   n.Name,
		KubeClient: cs,
		Devices:    dradriver.NodeDevices(n.Name, labels, n.opts.GPUs),
		KubeletDir: kp.root,
		CDIDir:     cp.cdi,
		Log:        log,
	}); err != nil {
		return err
	}
	if err := n.draPlugin.WaitReady(ctx, startTimeout); err != nil {
		return fmt.Errorf("%w; see %s and %s", err, n.draLog.Name(), filepath.Join(n.LogDir, "kubelet.log"))
	}
	return nil
}

// DRAPlugin is the node's DRA kubelet plugin (NVIDIA's, stood in for),
// for a test to read what it prepared.
func (n *RealNode) DRAPlugin() *draplugin.Plugin { return n.draPlugin }
