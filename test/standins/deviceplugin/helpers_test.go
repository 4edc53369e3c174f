package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// waitFor bounds every wait in these tests; the plugin polls every
// testPoll, so a few polls are enough.
const (
	waitFor  = 10 * time.Second
	testPoll = 50 * time.Millisecond
)

// socketDir returns a new directory with a short path: a unix socket path
// must stay under 108 bytes, which t.TempDir() may not.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// startPlugin starts a plugin in dir with four devices GPU-t-0..3 unless o
// says otherwise, and stops it when the test ends.
func startPlugin(t *testing.T, dir string, o Options) *Plugin {
	t.Helper()
	o.PluginDir = dir
	if o.Devices == 0 {
		o.Devices = 4
	}
	if o.UUIDPrefix == "" {
		o.UUIDPrefix = "t"
	}
	if o.PollInterval == 0 {
		o.PollInterval = testPoll
	}
	o.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	p, err := Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return p
}

// dial connects to a unix socket as the kubelet does.
func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// fakeKubelet is the kubelet's device-plugin Registration service on
// kubelet.sock in a directory. Like the kubelet's device manager, it
// checks the version, then dials the plugin's endpoint in that directory
// and asks for its options before it answers.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer

	dir      string
	srv      *grpc.Server
	refuse   atomic.Int32 // how many more Register calls to refuse
	calls    atomic.Int32 // Register calls received
	requests chan *pluginapi.RegisterRequest
}

// startFakeKubelet serves a fakeKubelet on dir/kubelet.sock that refuses
// the first refuse registrations, and stops it when the test ends.
func startFakeKubelet(t *testing.T, dir string, refuse int) *fakeKubelet {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, kubeletSocketName))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{dir: dir, srv: grpc.NewServer(), requests: make(chan *pluginapi.RegisterRequest, 16)}
	k.refuse.Store(int32(refuse))
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go func() { _ = k.srv.Serve(lis) }()
	t.Cleanup(k.stop)
	return k
}

// Register accepts a registration once the plugin answers on its endpoint.
func (k *fakeKubelet) Register(ctx context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.calls.Add(1)
	if r.GetVersion() != pluginapi.Version {
		return nil, status.Errorf(codes.InvalidArgument, "unsupported version %q", r.GetVersion())
	}
	if k.refuse.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "not ready")
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, r.GetEndpoint()), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	if _, err := pluginapi.NewDevicePluginClient(conn).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		return nil, fmt.Errorf("connect to the plugin: %w", err)
	}
	k.requests <- proto.CloneOf(r)
	return &pluginapi.Empty{}, nil
}

// next returns the next accepted registration, failing the test if none
// comes in time.
func (k *fakeKubelet) next(t *testing.T) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.requests:
		return r
	case <-time.After(waitFor):
		t.Fatalf("no registration within %s (%d Register calls)", waitFor, k.calls.Load())
		return nil
	}
}

// stop stops serving; closing the listener removes kubelet.sock, as a
// kubelet that stops leaves none that answers.
func (k *fakeKubelet) stop() { k.srv.Stop() }

// waitRegistered waits, bounded, for p to be registered.
func waitRegistered(t *testing.T, p *Plugin) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	if err := p.WaitRegistered(ctx); err != nil {
		t.Fatalf("WaitRegistered: %v", err)
	}
}

// exists reports whether path names a file.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}
