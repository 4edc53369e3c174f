package deviceplugin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// VisibleDevicesEnv is the variable NVIDIA's plugin sets, with its default
// "envvar" device-list strategy, to the container's device IDs; the NVIDIA
// container runtime reads it to decide which GPUs to expose.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// errNoDevices is returned for a container request without device IDs,
// which the kubelet never sends.
var errNoDevices = errors.New("asks for no devices")

// Allocation is what Allocate answered for one container.
type Allocation struct {
	// DeviceIDs are the devices the kubelet asked for, in its order.
	DeviceIDs []string
	// Envs are the environment variables the container gets.
	Envs map[string]string
}

// allocate answers req for the devices d, one Allocation per container
// request. Any unknown device ID fails the whole request, with an error
// wrapping ErrUnknownDevice that names every unknown ID.
func allocate(d *deviceSet, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, []Allocation, error) {
	resp := &pluginapi.AllocateResponse{}
	var allocs []Allocation
	for i, cr := range req.GetContainerRequests() {
		ids := cr.GetDevicesIds()
		if len(ids) == 0 {
			return nil, nil, fmt.Errorf("container request %d %w", i, errNoDevices)
		}
		if unknown := d.unknown(ids); len(unknown) > 0 {
			return nil, nil, fmt.Errorf("container request %d: %w %s (known: %s)",
				i, ErrUnknownDevice, strings.Join(unknown, ", "), strings.Join(d.list(), ", "))
		}
		a := Allocation{
			DeviceIDs: slices.Clone(ids),
			Envs:      map[string]string{VisibleDevicesEnv: strings.Join(ids, ",")},
		}
		allocs = append(allocs, a)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: maps.Clone(a.Envs)})
	}
	return resp, allocs, nil
}

// preferred answers GetPreferredAllocation trivially: the devices that must
// be included, then the available ones in the kubelet's order, up to the
// allocation size.
func preferred(req *pluginapi.PreferredAllocationRequest) *pluginapi.PreferredAllocationResponse {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		size := int(cr.GetAllocationSize())
		ids := slices.Clone(cr.GetMustIncludeDeviceIDs())
		for _, id := range cr.GetAvailableDeviceIDs() {
			if len(ids) >= size {
				break
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp
}
