package deviceplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// server is the DevicePlugin service served on one socket file. When that
// file goes, a new server takes its place.
type server struct {
	grpc   *grpc.Server
	path   string
	id     fileID     // the socket file this server made
	failed chan error // receives Serve's error if it ends before stop
}

// listenAndServe serves svc on a new unix socket at path, replacing any
// file there (a socket left behind by an earlier run).
func listenAndServe(path string, svc pluginapi.DevicePluginServer) (*server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create the device-plugin directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove the old socket: %w", err)
	}
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The file is removed by stop, and only if it is still this server's:
	// a new server may have made one at the same path.
	lis.SetUnlinkOnClose(false)
	id := statID(path)
	if id.absent() {
		_ = lis.Close()
		return nil, fmt.Errorf("listen on %s: the socket file is gone", path)
	}
	// WaitForHandlers: stop returns only once every ListAndWatch has ended.
	s := &server{grpc: grpc.NewServer(grpc.WaitForHandlers(true)), path: path, id: id, failed: make(chan error, 1)}
	pluginapi.RegisterDevicePluginServer(s.grpc, svc)
	go func() {
		if err := s.grpc.Serve(lis); err != nil {
			s.failed <- fmt.Errorf("serve on %s: %w", path, err)
		}
	}()
	return s, nil
}

// stop ends every RPC and connection, and removes the socket file if it is
// still the one this server made.
func (s *server) stop() error {
	s.grpc.Stop()
	if statID(s.path) != s.id {
		return nil
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the plugin socket: %w", err)
	}
	return nil
}
