package deviceplugin

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registerTimeout bounds one Register call; the kubelet dials the plugin
// back within it (its own dial timeout is 10s).
const registerTimeout = 15 * time.Second

// registerRequest is what the plugin tells the kubelet: the API version,
// its socket's file name in the device-plugin directory, the resource, and
// that it offers neither PreStartContainer nor GetPreferredAllocation.
func registerRequest(o Options) *pluginapi.RegisterRequest {
	return &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     o.SocketName,
		ResourceName: o.ResourceName,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: false},
	}
}

// register sends req to the kubelet's Registration service at socket.
func register(ctx context.Context, socket string, req *pluginapi.RegisterRequest) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial the kubelet at %s: %w", socket, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, req); err != nil {
		return fmt.Errorf("register with the kubelet at %s: %w", socket, err)
	}
	return nil
}

// retrier spaces registration attempts: after a failure through a
// kubelet socket, the next attempt through it waits min, then twice as
// long after each further failure, up to max. A new kubelet socket (a
// kubelet that restarted) is tried at once.
type retrier struct {
	min, max time.Duration
	delay    time.Duration // the last wait; zero when nothing failed
	at       time.Time     // no attempt through kubelet before this
	kubelet  fileID        // the socket the last failed attempt used
}

// due reports whether to try registering through kubelet at now.
func (r *retrier) due(now time.Time, kubelet fileID) bool {
	return kubelet != r.kubelet || !now.Before(r.at)
}

// failed records a failed attempt through kubelet at now.
func (r *retrier) failed(now time.Time, kubelet fileID) {
	if kubelet != r.kubelet || r.delay == 0 {
		r.delay = r.min
	} else {
		r.delay = min(2*r.delay, r.max)
	}
	r.kubelet, r.at = kubelet, now.Add(r.delay)
}

// succeeded forgets the failures.
func (r *retrier) succeeded() { *r = retrier{min: r.min, max: r.max} }
