package draplugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

func TestCDISpec(t *testing.T) {
	claimName := types.NamespacedName{Namespace: "team", Name: "llm-modelgate-gpu-abcde"}
	dev := func(request, device, uuid string) PreparedDevice {
		return PreparedDevice{Request: request, Device: device, UUID: uuid}
	}
	edits := func(env ...string) cdispec.ContainerEdits { return cdispec.ContainerEdits{Env: env} }
	const claimEnv = "MODELGATE_DRA_CLAIM=team/llm-modelgate-gpu-abcde"
	for name, tc := range map[string]struct {
		devices []PreparedDevice
		want    []cdispec.Device
	}{
		"one GPU": {
			devices: []PreparedDevice{dev("gpu", "gpu-3", "GPU-n-00000003")},
			want: []cdispec.Device{
				{Name: "u1-gpu-3", ContainerEdits: edits("NVIDIA_VISIBLE_DEVICES=GPU-n-00000003", claimEnv)},
			},
		},
		"two GPUs of one request: each device sets both, in allocation order": {
			devices: []PreparedDevice{dev("gpu", "gpu-3", "GPU-n-00000003"), dev("gpu", "gpu-0", "GPU-n-00000000")},
			want: []cdispec.Device{
				{Name: "u1-gpu-3", ContainerEdits: edits("NVIDIA_VISIBLE_DEVICES=GPU-n-00000003,GPU-n-00000000", claimEnv)},
				{Name: "u1-gpu-0", ContainerEdits: edits("NVIDIA_VISIBLE_DEVICES=GPU-n-00000003,GPU-n-00000000", claimEnv)},
			},
		},
		"two requests: each its own GPUs": {
			devices: []PreparedDevice{dev("a", "gpu-0", "GPU-n-00000000"), dev("b", "gpu-1", "GPU-n-00000001")},
			want: []cdispec.Device{
				{Name: "u1-gpu-0", ContainerEdits: edits("NVIDIA_VISIBLE_DEVICES=GPU-n-00000000", claimEnv)},
				{Name: "u1-gpu-1", ContainerEdits: edits("NVIDIA_VISIBLE_DEVICES=GPU-n-00000001", claimEnv)},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := cdiSpec(Preparation{Claim: claimName, UID: "u1", Devices: tc.devices})
			if err != nil {
				t.Fatal(err)
			}
			want := cdispec.Spec{Version: "0.3.0", Kind: "k8s.gpu.nvidia.com/gpu", Devices: tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCDINames(t *testing.T) {
	const uid = types.UID("0b7c6d1e-2f3a-4b5c-8d9e-0a1b2c3d4e5f")
	got := map[string]string{
		"device ID": cdiDeviceID(uid, "gpu-2"),
		"spec file": specFileName(uid),
	}
	want := map[string]string{
		"device ID": "k8s.gpu.nvidia.com/gpu=0b7c6d1e-2f3a-4b5c-8d9e-0a1b2c3d4e5f-gpu-2",
		"spec file": "k8s.gpu.nvidia.com-gpu_0b7c6d1e-2f3a-4b5c-8d9e-0a1b2c3d4e5f.json",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

func TestWriteAndRemoveSpec(t *testing.T) {
	dir := t.TempDir()
	spec := cdispec.Spec{Version: "0.3.0", Kind: cdiKind, Devices: []cdispec.Device{{Name: "d", ContainerEdits: cdispec.ContainerEdits{Env: []string{"A=b"}}}}}
	if err := writeSpec(dir, "s.json", spec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "s.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got cdispec.Spec
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spec, got); diff != "" {
		t.Errorf("spec read back (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("files %v, want only s.json (no temporary file left)", entries)
	}
	for range 2 {
		if err := removeSpec(dir, "s.json"); err != nil {
			t.Errorf("removeSpec: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s.json")); !os.IsNotExist(err) {
		t.Errorf("s.json is still there: %v", err)
	}
}
