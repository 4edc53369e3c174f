package deviceplugin

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// service implements the DevicePlugin gRPC service. One service outlives
// the sockets it is served on, so health and allocations survive a
// re-registration.
type service struct {
	pluginapi.UnimplementedDevicePluginServer

	devices *deviceSet
	log     logr.Logger

	mu          sync.Mutex
	allocations []Allocation
}

var _ pluginapi.DevicePluginServer = (*service)(nil)

// GetDevicePluginOptions announces neither PreStartContainer nor
// GetPreferredAllocation.
func (s *service) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends every device with its health, then the whole list
// again at every change, until the stream ends.
func (s *service) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		devs, changed := s.devices.snapshot()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		s.log.V(1).Info("sent devices", "devices", len(devs))
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Allocate gives each container NVIDIA_VISIBLE_DEVICES, and refuses unknown
// device IDs.
func (s *service) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp, allocs, err := allocate(s.devices, req)
	if err != nil {
		s.log.Info("refused allocation", "error", err.Error())
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	s.mu.Lock()
	s.allocations = append(s.allocations, allocs...)
	s.mu.Unlock()
	for _, a := range allocs {
		s.log.Info("allocated", "devices", a.DeviceIDs)
	}
	return resp, nil
}

// GetPreferredAllocation is not announced; it answers trivially.
func (s *service) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return preferred(req), nil
}

// PreStartContainer is not announced; it does nothing.
func (s *service) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// recorded returns a copy of every Allocation answered so far.
func (s *service) recorded() []Allocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Allocation, len(s.allocations))
	for i, a := range s.allocations {
		out[i] = Allocation{DeviceIDs: slices.Clone(a.DeviceIDs), Envs: maps.Clone(a.Envs)}
	}
	return out
}
