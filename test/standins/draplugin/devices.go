package draplugin

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// ErrUnknownDevice is wrapped by errors about an allocated device the
// node's pool does not have.
var ErrUnknownDevice = errors.New("unknown device")

// ErrDeviceInUse is wrapped by errors about a device that another
// prepared claim holds.
var ErrDeviceInUse = errors.New("device in use")

// inventory maps the published devices' names to their GPUs' UUIDs.
type inventory map[string]string

// newInventory reads the UUIDs of devs; every device needs a name and a
// uuid string attribute, both unique.
func newInventory(devs []resourcev1.Device) (inventory, error) {
	inv := make(inventory, len(devs))
	seen := map[string]string{}
	var errs []error
	for i, d := range devs {
		a, ok := d.Attributes[uuidAttribute]
		switch {
		case d.Name == "":
			errs = append(errs, fmt.Errorf("device %d has no name", i))
			continue
		case inv[d.Name] != "":
			errs = append(errs, fmt.Errorf("device %s is listed twice", d.Name))
			continue
		case !ok || a.StringValue == nil || *a.StringValue == "":
			errs = append(errs, fmt.Errorf("device %s has no %s string attribute", d.Name, uuidAttribute))
			continue
		case seen[*a.StringValue] != "":
			errs = append(errs, fmt.Errorf("devices %s and %s have the same %s %s", seen[*a.StringValue], d.Name, uuidAttribute, *a.StringValue))
			continue
		}
		inv[d.Name] = *a.StringValue
		seen[*a.StringValue] = d.Name
	}
	return inv, errors.Join(errs...)
}

// names returns the device names, sorted.
func (inv inventory) names() []string {
	out := make([]string, 0, len(inv))
	for n := range inv {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// driverResources is the one pool, named after the node, of one slice
// with devs, as PublishResources takes it.
func driverResources(node string, devs []resourcev1.Device) resourceslice.DriverResources {
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: []resourceslice.Slice{{Devices: slices.Clone(devs)}}},
	}}
}

// PreparedDevice is one GPU prepared for a claim.
type PreparedDevice struct {
	// Request is the claim's request the device was allocated for.
	Request string
	// Pool and Device name the device in its ResourceSlice.
	Pool, Device string
	// UUID is the GPU's uuid attribute.
	UUID string
	// CDIDeviceID is the CDI device the container runtime is given:
	// k8s.gpu.nvidia.com/gpu=<claim UID>-<device>.
	CDIDeviceID string
}

// selectDevices returns what to prepare for a claim: its allocation's
// results for driver from pool (this node's), in the allocation's order.
// Results of other drivers or pools are another plugin's to prepare. A
// device the pool does not have is an error wrapping ErrUnknownDevice
// naming every such device; an unallocated claim is an error.
func selectDevices(claim *resourcev1.ResourceClaim, driver, pool string, inv inventory) ([]PreparedDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	var (
		out     []PreparedDevice
		unknown []string
	)
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != driver || r.Pool != pool {
			continue
		}
		uuid, ok := inv[r.Device]
		if !ok {
			unknown = append(unknown, r.Device)
			continue
		}
		out = append(out, PreparedDevice{
			Request: r.Request, Pool: r.Pool, Device: r.Device, UUID: uuid,
			CDIDeviceID: cdiDeviceID(claim.UID, r.Device),
		})
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("claim %s/%s: %w %s in pool %s (known: %s)", claim.Namespace, claim.Name,
			ErrUnknownDevice, strings.Join(unknown, ", "), pool, strings.Join(inv.names(), ", "))
	}
	return out, nil
}

// inUse returns an error wrapping ErrDeviceInUse when a device of devs is
// held by a prepared claim other than uid, naming each device and its
// holder; nil otherwise.
func inUse(prepared map[types.UID]Preparation, uid types.UID, devs []PreparedDevice) error {
	holders := map[string]string{}
	for other, p := range prepared {
		if other == uid {
			continue
		}
		for _, d := range p.Devices {
			holders[d.Device] = p.Claim.String()
		}
	}
	var busy []string
	for _, d := range devs {
		if h, ok := holders[d.Device]; ok {
			busy = append(busy, d.Device+" (held by claim "+h+")")
		}
	}
	if len(busy) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrDeviceInUse, strings.Join(busy, ", "))
}
