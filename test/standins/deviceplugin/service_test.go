package deviceplugin

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// health receives one ListAndWatch message as "ID Health" lines.
func health(t *testing.T, stream grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse]) []string {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("ListAndWatch: %v", err)
	}
	var out []string
	for _, d := range resp.GetDevices() {
		out = append(out, d.GetID()+" "+d.GetHealth())
	}
	return out
}

func TestListAndWatch(t *testing.T) {
	p := startPlugin(t, socketDir(t), Options{Devices: 3})
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	stream, err := pluginapi.NewDevicePluginClient(dial(t, p.SocketPath())).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}

	want := []string{"GPU-t-0 Healthy", "GPU-t-1 Healthy", "GPU-t-2 Healthy"}
	if diff := cmp.Diff(want, health(t, stream)); diff != "" {
		t.Errorf("first message (-want +got):\n%s", diff)
	}

	if err := p.SetHealthy("GPU-t-1", false); err != nil {
		t.Fatal(err)
	}
	want = []string{"GPU-t-0 Healthy", "GPU-t-1 Unhealthy", "GPU-t-2 Healthy"}
	if diff := cmp.Diff(want, health(t, stream)); diff != "" {
		t.Errorf("after SetHealthy(GPU-t-1, false) (-want +got):\n%s", diff)
	}

	// Setting the same health again is no change; the next message is the
	// next change.
	if err := p.SetHealthy("GPU-t-1", false); err != nil {
		t.Fatal(err)
	}
	if err := p.SetHealthy("GPU-t-1", true); err != nil {
		t.Fatal(err)
	}
	want = []string{"GPU-t-0 Healthy", "GPU-t-1 Healthy", "GPU-t-2 Healthy"}
	if diff := cmp.Diff(want, health(t, stream)); diff != "" {
		t.Errorf("after SetHealthy(GPU-t-1, true) (-want +got):\n%s", diff)
	}

	if err := p.SetHealthy("GPU-t-3", false); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("SetHealthy(GPU-t-3) = %v, want an error wrapping ErrUnknownDevice", err)
	}
}

func TestAllocate(t *testing.T) {
	containers := func(ids ...[]string) *pluginapi.AllocateRequest {
		req := &pluginapi.AllocateRequest{}
		for _, c := range ids {
			req.ContainerRequests = append(req.ContainerRequests, &pluginapi.ContainerAllocateRequest{DevicesIds: c})
		}
		return req
	}
	envs := func(values ...string) *pluginapi.AllocateResponse {
		resp := &pluginapi.AllocateResponse{}
		for _, v := range values {
			resp.ContainerResponses = append(resp.ContainerResponses,
				&pluginapi.ContainerAllocateResponse{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": v}})
		}
		return resp
	}
	tests := map[string]struct {
		req       *pluginapi.AllocateRequest
		want      *pluginapi.AllocateResponse
		wantAlloc []Allocation
		wantNamed []string // in the error message, when the request is refused
	}{
		"two devices, in the kubelet's order": {
			req:  containers([]string{"GPU-t-2", "GPU-t-0"}),
			want: envs("GPU-t-2,GPU-t-0"),
			wantAlloc: []Allocation{
				{DeviceIDs: []string{"GPU-t-2", "GPU-t-0"}, Envs: map[string]string{VisibleDevicesEnv: "GPU-t-2,GPU-t-0"}},
			},
		},
		"two containers": {
			req:  containers([]string{"GPU-t-1"}, []string{"GPU-t-3", "GPU-t-0"}),
			want: envs("GPU-t-1", "GPU-t-3,GPU-t-0"),
			wantAlloc: []Allocation{
				{DeviceIDs: []string{"GPU-t-1"}, Envs: map[string]string{VisibleDevicesEnv: "GPU-t-1"}},
				{DeviceIDs: []string{"GPU-t-3", "GPU-t-0"}, Envs: map[string]string{VisibleDevicesEnv: "GPU-t-3,GPU-t-0"}},
			},
		},
		"unknown devices": {
			req:       containers([]string{"GPU-t-0"}, []string{"GPU-t-1", "GPU-t-4", "GPU-x-0"}),
			wantNamed: []string{"container request 1", "GPU-t-4", "GPU-x-0"},
		},
		"no devices": {
			req:       containers([]string{"GPU-t-0"}, nil),
			wantNamed: []string{"container request 1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := startPlugin(t, socketDir(t), Options{})
			got, err := pluginapi.NewDevicePluginClient(dial(t, p.SocketPath())).Allocate(t.Context(), tc.req)
			if tc.wantNamed != nil {
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("Allocate = %v, %v; want an InvalidArgument error", got, err)
				}
				for _, s := range tc.wantNamed {
					if !strings.Contains(status.Convert(err).Message(), s) {
						t.Errorf("error %q does not name %q", status.Convert(err).Message(), s)
					}
				}
			} else {
				if err != nil {
					t.Fatalf("Allocate: %v", err)
				}
				if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
					t.Errorf("Allocate (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.wantAlloc, p.Allocations(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Allocations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAllocateUnknownDeviceError(t *testing.T) {
	d := newDeviceSet([]string{"GPU-t-0"})
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-t-1"}}}}
	if _, _, err := allocate(d, req); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("allocate = %v, want an error wrapping ErrUnknownDevice", err)
	}
}

func TestAnnouncedOptions(t *testing.T) {
	p := startPlugin(t, socketDir(t), Options{})
	c := pluginapi.NewDevicePluginClient(dial(t, p.SocketPath()))

	opts, err := c.GetDevicePluginOptions(t.Context(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&pluginapi.DevicePluginOptions{}, opts, protocmp.Transform()); diff != "" {
		t.Errorf("GetDevicePluginOptions (-want +got):\n%s", diff)
	}

	pre, err := c.PreStartContainer(t.Context(), &pluginapi.PreStartContainerRequest{DevicesIds: []string{"GPU-t-0"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&pluginapi.PreStartContainerResponse{}, pre, protocmp.Transform()); diff != "" {
		t.Errorf("PreStartContainer (-want +got):\n%s", diff)
	}
}

func TestPreferred(t *testing.T) {
	tests := map[string]struct {
		available, must []string
		size            int32
		want            []string
	}{
		"first available":           {available: []string{"a", "b", "c"}, size: 2, want: []string{"a", "b"}},
		"must include first":        {available: []string{"a", "b", "c"}, must: []string{"c"}, size: 2, want: []string{"c", "a"}},
		"must include not repeated": {available: []string{"a", "b"}, must: []string{"a"}, size: 2, want: []string{"a", "b"}},
		"fewer than asked":          {available: []string{"a"}, size: 3, want: []string{"a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
				{AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size},
			}}
			got := preferred(req).GetContainerResponses()[0].GetDeviceIDs()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preferred (-want +got):\n%s", diff)
			}
		})
	}
}
