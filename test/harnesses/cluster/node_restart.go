package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Restart restarts the node's services, as a node's systemd would: the
// kubelet and containerd get SIGTERM, then start again with the same
// configuration and state (their new logs are kubelet-<n>.log and
// containerd-<n>.log). The containers keep running meanwhile (their shims
// outlive containerd), unless killContainers, which kills every
// container and sandbox first, as a reboot of the machine would (the
// node's folders, its Pods' network namespaces' mounts and its address
// allocations stay, as a disk does). The device and DRA plugins register
// again with the new kubelet, and Restart returns once the Node is Ready
// again with its GPUs allocatable. What the Pods do then is the
// kubelet's: nothing here touches them.
func (n *RealNode) Restart(ctx context.Context, admin client.Client, killContainers bool) error {
	if n == nil || n.kubelet == nil || n.stopping.Load() {
		return errors.New("the real node is not running")
	}
	restarted := metav1.Now()
	for _, p := range []*process{n.kubelet, n.container} {
		p.retired.Store(true)
		if err := p.stop(); err != nil {
			return fmt.Errorf("stopping %s: %w", p.name, err)
		}
	}
	if killContainers {
		if err := killAll(containerProcesses, 5*time.Second); err != nil {
			return fmt.Errorf("killing the node's containers: %w", err)
		}
	}
	n.restarts++
	suffix := "-" + strconv.Itoa(n.restarts) + ".log"
	if err := n.startContainerd(ctx, "containerd"+suffix); err != nil {
		return err
	}
	// The Node was Ready before: wait for the new kubelet's own word,
	// starting it again whenever it exits first.
	if err := n.kubeletUntilReady(ctx, admin, restarted, "kubelet-"+strconv.Itoa(n.restarts)); err != nil {
		return err
	}
	n.watchServices()
	return n.waitReady(ctx, admin)
}

// kubeletRestartDelay is how long kubeletUntilReady waits before starting
// an exited kubelet again, as systemd's RestartSec does.
const kubeletRestartDelay = time.Second

// kubeletUntilReady starts the kubelet (logging to <log>.log, then
// <log>-<n>.log for each start after) and waits until the Node's Ready
// condition is true with a heartbeat no older than since (the API keeps
// seconds), starting the kubelet again when it exits before, as systemd's
// Restart= does: containerd may not serve the CRI yet when its socket
// appears (after a reboot it first recovers its containers), and the
// kubelet then exits ("server is not initialized yet").
func (n *RealNode) kubeletUntilReady(ctx context.Context, admin client.Client, since metav1.Time, log string) error {
	floor := since.Truncate(time.Second)
	last := "not read"
	starts := 0
	start := func() error {
		name := log + ".log"
		if starts > 0 {
			name = log + "-" + strconv.Itoa(starts+1) + ".log"
		}
		starts++
		p, err := startProcessEnv("kubelet", n.bins.kubelet, n.kubeletArgs, nodeEnv(n.bins), filepath.Join(n.LogDir, name), nil)
		if err == nil {
			n.kubelet = p
		}
		return err
	}
	if err := start(); err != nil {
		return err
	}
	var exited time.Time
	err := wait.PollUntilContextTimeout(ctx, pollInterval, startTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-n.kubelet.Exited():
			if exited.IsZero() {
				exited = time.Now()
			}
			if time.Since(exited) < kubeletRestartDelay {
				return false, nil
			}
			exited = time.Time{}
			return false, start()
		default:
		}
		node := &corev1.Node{}
		if err := admin.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return false, fmt.Errorf("reading node %s: %w", n.Name, err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s: %s), heartbeat %s", c.Status, c.Reason, c.Message, c.LastHeartbeatTime.UTC().Format(time.RFC3339))
				return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(floor), nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for node %s's kubelet to report Ready after its restart (started %d times; last: %s; kubelet's log %s):\n%s: %w",
			n.Name, starts, last, n.kubelet.log, Tail(n.kubelet.log, 30), err)
	}
	return nil
}
