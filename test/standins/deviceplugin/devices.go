package deviceplugin

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ErrUnknownDevice is wrapped by errors about a device ID the plugin does
// not advertise.
var ErrUnknownDevice = errors.New("unknown device")

// deviceSet is the advertised devices and their health, safe for
// concurrent use. Every change closes the channel handed out with the
// previous snapshot, so that ListAndWatch streams send the new list.
type deviceSet struct {
	mu      sync.Mutex
	ids     []string // in advertised order
	healthy map[string]bool
	changed chan struct{}
}

// newDeviceSet returns the devices ids, all healthy.
func newDeviceSet(ids []string) *deviceSet {
	d := &deviceSet{ids: slices.Clone(ids), healthy: make(map[string]bool, len(ids)), changed: make(chan struct{})}
	for _, id := range ids {
		d.healthy[id] = true
	}
	return d
}

// snapshot returns the devices as ListAndWatch sends them, and a channel
// closed at the next change.
func (d *deviceSet) snapshot() ([]*pluginapi.Device, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	devs := make([]*pluginapi.Device, len(d.ids))
	for i, id := range d.ids {
		health := pluginapi.Unhealthy
		if d.healthy[id] {
			health = pluginapi.Healthy
		}
		devs[i] = &pluginapi.Device{ID: id, Health: health}
	}
	return devs, d.changed
}

// setHealthy marks device id healthy or not; a change wakes the watchers.
func (d *deviceSet) setHealthy(id string, healthy bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	was, ok := d.healthy[id]
	if !ok {
		return fmt.Errorf("device %q: %w", id, ErrUnknownDevice)
	}
	if was == healthy {
		return nil
	}
	d.healthy[id] = healthy
	close(d.changed)
	d.changed = make(chan struct{})
	return nil
}

// unknown returns the IDs in ids that are not advertised, in their order.
func (d *deviceSet) unknown(ids []string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, id := range ids {
		if _, ok := d.healthy[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// list returns the advertised IDs in order.
func (d *deviceSet) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ids)
}
