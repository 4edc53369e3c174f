package draplugin

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/test/standins/dradriver"
)

// testNode's devices are what the simulated cluster publishes for a node
// of two H100s.
const testNode = "gpu-node"

func testDevices() []resourcev1.Device {
	return dradriver.NodeDevices(testNode, map[string]string{
		"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper",
	}, 2)
}

// claim is an allocated claim ns/name with uid, and these results.
func claim(uid string, results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-modelgate-gpu-x", UID: types.UID(uid)},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: results},
		}},
	}
}

func result(request, driver, pool, device string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: pool, Device: device}
}

func TestNodeDevicesCarryTheDriversAttributes(t *testing.T) {
	devs := testDevices()
	if len(devs) != 2 {
		t.Fatalf("got %d devices, want 2", len(devs))
	}
	d := devs[1]
	got := map[string]string{
		"name":         d.Name,
		"uuid":         *d.Attributes["uuid"].StringValue,
		"productName":  *d.Attributes["productName"].StringValue,
		"architecture": *d.Attributes["architecture"].StringValue,
		"memory":       ptr.To(d.Capacity["memory"].Value).String(),
	}
	want := map[string]string{
		"name": "gpu-1", "uuid": "GPU-gpu-node-00000001", "productName": "NVIDIA H100 80GB HBM3",
		"architecture": "Hopper", "memory": "81559Mi",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("device (-want +got):\n%s", diff)
	}
}

func TestNewInventory(t *testing.T) {
	named := func(name, uuid string) resourcev1.Device {
		d := resourcev1.Device{Name: name}
		if uuid != "" {
			d.Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{uuidAttribute: {StringValue: ptr.To(uuid)}}
		}
		return d
	}
	for name, tc := range map[string]struct {
		devs    []resourcev1.Device
		want    inventory
		wantErr bool
	}{
		"the cluster's devices": {devs: testDevices(), want: inventory{"gpu-0": "GPU-gpu-node-00000000", "gpu-1": "GPU-gpu-node-00000001"}},
		"no uuid":               {devs: []resourcev1.Device{named("gpu-0", "")}, wantErr: true},
		"no name":               {devs: []resourcev1.Device{named("", "GPU-a")}, wantErr: true},
		"a name twice":          {devs: []resourcev1.Device{named("gpu-0", "GPU-a"), named("gpu-0", "GPU-b")}, wantErr: true},
		"a uuid twice":          {devs: []resourcev1.Device{named("gpu-0", "GPU-a"), named("gpu-1", "GPU-a")}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := newInventory(tc.devs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("inventory (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectDevices(t *testing.T) {
	inv, err := newInventory(testDevices())
	if err != nil {
		t.Fatal(err)
	}
	const uid = "c1"
	prepared := func(request, device, uuid string) PreparedDevice {
		return PreparedDevice{Request: request, Pool: testNode, Device: device, UUID: uuid,
			CDIDeviceID: "k8s.gpu.nvidia.com/gpu=c1-" + device}
	}
	for name, tc := range map[string]struct {
		claim   *resourcev1.ResourceClaim
		want    []PreparedDevice
		wantErr error
	}{
		"one GPU": {
			claim: claim(uid, result("gpu", DriverName, testNode, "gpu-1")),
			want:  []PreparedDevice{prepared("gpu", "gpu-1", "GPU-gpu-node-00000001")},
		},
		"two GPUs, in the allocation's order": {
			claim: claim(uid, result("gpu", DriverName, testNode, "gpu-1"), result("gpu", DriverName, testNode, "gpu-0")),
			want:  []PreparedDevice{prepared("gpu", "gpu-1", "GPU-gpu-node-00000001"), prepared("gpu", "gpu-0", "GPU-gpu-node-00000000")},
		},
		"a subrequest keeps its name": {
			claim: claim(uid, result("gpu/h100", DriverName, testNode, "gpu-0")),
			want:  []PreparedDevice{prepared("gpu/h100", "gpu-0", "GPU-gpu-node-00000000")},
		},
		"another driver's and another pool's devices are left out": {
			claim: claim(uid, result("nic", "sriov.example.com", testNode, "gpu-0"), result("gpu", DriverName, "other-node", "gpu-0"),
				result("gpu", DriverName, testNode, "gpu-0")),
			want: []PreparedDevice{prepared("gpu", "gpu-0", "GPU-gpu-node-00000000")},
		},
		"nothing of this node's": {
			claim: claim(uid, result("gpu", DriverName, "other-node", "gpu-0")),
		},
		"a device the pool lacks": {
			claim:   claim(uid, result("gpu", DriverName, testNode, "gpu-0"), result("gpu", DriverName, testNode, "gpu-7")),
			wantErr: ErrUnknownDevice,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := selectDevices(tc.claim, DriverName, testNode, inv)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectDevicesOfAnUnallocatedClaim(t *testing.T) {
	c := claim("c1")
	c.Status.Allocation = nil
	if _, err := selectDevices(c, DriverName, testNode, inventory{}); err == nil {
		t.Fatal("an unallocated claim was prepared")
	}
}

func TestInUse(t *testing.T) {
	held := map[types.UID]Preparation{
		"a": {Claim: types.NamespacedName{Namespace: "ns", Name: "a"}, UID: "a", Devices: []PreparedDevice{{Device: "gpu-0"}}},
	}
	for name, tc := range map[string]struct {
		uid     types.UID
		devices []string
		wantErr error
	}{
		"a free device":                {uid: "b", devices: []string{"gpu-1"}},
		"a device another claim holds": {uid: "b", devices: []string{"gpu-1", "gpu-0"}, wantErr: ErrDeviceInUse},
		"the same claim again":         {uid: "a", devices: []string{"gpu-0"}},
		"no devices":                   {uid: "b"},
	} {
		t.Run(name, func(t *testing.T) {
			var devs []PreparedDevice
			for _, d := range tc.devices {
				devs = append(devs, PreparedDevice{Device: d})
			}
			if err := inUse(held, tc.uid, devs); !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestDriverResources(t *testing.T) {
	devs := testDevices()
	got := driverResources(testNode, devs)
	if len(got.Pools) != 1 {
		t.Fatalf("pools %v, want one", got.Pools)
	}
	pool, ok := got.Pools[testNode]
	if !ok || len(pool.Slices) != 1 {
		t.Fatalf("pool %s: %+v, want one slice", testNode, got.Pools)
	}
	if diff := cmp.Diff(devs, pool.Slices[0].Devices); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
}
