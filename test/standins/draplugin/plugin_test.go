package draplugin

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// shortDir returns a new folder with a short path: a unix socket path
// must stay under 108 bytes, which t.TempDir() may not.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "drap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// newTestPlugin is a plugin for testNode's devices writing into a new
// folder, without the helper: its DRAPlugin methods only.
func newTestPlugin(t *testing.T) *Plugin {
	t.Helper()
	inv, err := newInventory(testDevices())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{NodeName: testNode, Devices: testDevices(), CDIDir: t.TempDir()}
	return &Plugin{opts: o, inv: inv, log: testr.New(t), prepared: map[types.UID]Preparation{}}
}

func TestPrepareWritesTheSpecAndAnswersItsDevices(t *testing.T) {
	p := newTestPlugin(t)
	c := claim("u1", result("gpu", DriverName, testNode, "gpu-1"))
	got, err := p.PrepareResourceClaims(t.Context(), []*resourcev1.ResourceClaim{c})
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.UID]kubeletplugin.PrepareResult{"u1": {Devices: []kubeletplugin.Device{{
		Requests: []string{"gpu"}, PoolName: testNode, DeviceName: "gpu-1", CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/gpu=u1-gpu-1"},
	}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}

	file := filepath.Join(p.CDIDir(), "k8s.gpu.nvidia.com-gpu_u1.json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	wantSpec := cdispec.Spec{Version: "0.3.0", Kind: "k8s.gpu.nvidia.com/gpu", Devices: []cdispec.Device{{
		Name: "u1-gpu-1", ContainerEdits: cdispec.ContainerEdits{Env: []string{
			"NVIDIA_VISIBLE_DEVICES=GPU-gpu-node-00000001", "MODELGATE_DRA_CLAIM=ns/pod-modelgate-gpu-x",
		}},
	}}}
	if diff := cmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("spec file (-want +got):\n%s", diff)
	}

	wantPrepared := []Preparation{{
		Claim: types.NamespacedName{Namespace: "ns", Name: "pod-modelgate-gpu-x"}, UID: "u1", SpecFile: file,
		Devices: []PreparedDevice{{Request: "gpu", Pool: testNode, Device: "gpu-1", UUID: "GPU-gpu-node-00000001", CDIDeviceID: "k8s.gpu.nvidia.com/gpu=u1-gpu-1"}},
	}}
	if diff := cmp.Diff(wantPrepared, p.Prepared()); diff != "" {
		t.Errorf("Prepared (-want +got):\n%s", diff)
	}

	// The kubelet may ask again (after a restart): same answer.
	again, err := p.PrepareResourceClaims(t.Context(), []*resourcev1.ResourceClaim{c})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("second result (-want +got):\n%s", diff)
	}

	unprep, err := p.UnprepareResourceClaims(t.Context(), []kubeletplugin.NamespacedObject{{
		NamespacedName: types.NamespacedName{Namespace: "ns", Name: "pod-modelgate-gpu-x"}, UID: "u1",
	}})
	if err != nil || unprep["u1"] != nil {
		t.Fatalf("unprepare: %v, %v", err, unprep)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the spec file is still there after unprepare: %v", err)
	}
	if len(p.Prepared()) != 0 {
		t.Errorf("Prepared after unprepare: %+v", p.Prepared())
	}
	if diff := cmp.Diff(wantPrepared, p.Unprepared()); diff != "" {
		t.Errorf("Unprepared (-want +got):\n%s", diff)
	}
}

func TestPrepareRefusesPerClaim(t *testing.T) {
	p := newTestPlugin(t)
	first := claim("u1", result("gpu", DriverName, testNode, "gpu-0"))
	if res, err := p.PrepareResourceClaims(t.Context(), []*resourcev1.ResourceClaim{first}); err != nil || res["u1"].Err != nil {
		t.Fatalf("prepare: %v %v", err, res["u1"].Err)
	}
	taken := claim("u2", result("gpu", DriverName, testNode, "gpu-0"))
	taken.Name = "other"
	unknown := claim("u3", result("gpu", DriverName, testNode, "gpu-9"))
	free := claim("u4", result("gpu", DriverName, testNode, "gpu-1"))
	res, err := p.PrepareResourceClaims(t.Context(), []*resourcev1.ResourceClaim{taken, unknown, free})
	if err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[types.UID]error{"u2": ErrDeviceInUse, "u3": ErrUnknownDevice, "u4": nil} {
		if !errors.Is(res[uid].Err, want) {
			t.Errorf("claim %s: err = %v, want %v", uid, res[uid].Err, want)
		}
	}
	if !strings.Contains(res["u2"].Err.Error(), "held by claim ns/pod-modelgate-gpu-x") {
		t.Errorf("the refusal does not name the holder: %v", res["u2"].Err)
	}
	entries, err := os.ReadDir(p.CDIDir())
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if diff := cmp.Diff([]string{"k8s.gpu.nvidia.com-gpu_u1.json", "k8s.gpu.nvidia.com-gpu_u4.json"}, files); diff != "" {
		t.Errorf("spec files (-want +got):\n%s", diff)
	}
}

func TestUnprepareAClaimNotKnown(t *testing.T) {
	p := newTestPlugin(t)
	// Left by a plugin that was restarted.
	file := filepath.Join(p.CDIDir(), specFileName("old"))
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := p.UnprepareResourceClaims(t.Context(), []kubeletplugin.NamespacedObject{{
		NamespacedName: types.NamespacedName{Namespace: "ns", Name: "c"}, UID: "old",
	}})
	if err != nil || res["old"] != nil {
		t.Fatalf("unprepare: %v, %v", err, res)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the spec file is still there: %v", err)
	}
	want := []Preparation{{Claim: types.NamespacedName{Namespace: "ns", Name: "c"}, UID: "old", SpecFile: file}}
	if diff := cmp.Diff(want, p.Unprepared()); diff != "" {
		t.Errorf("Unprepared (-want +got):\n%s", diff)
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{NodeName: testNode, KubeClient: fake.NewClientset(), Devices: testDevices(), KubeletDir: "/k", CDIDir: "/cdi"}
	for name, tc := range map[string]struct {
		edit func(*Options)
		want []string
	}{
		"valid": {edit: func(*Options) {}},
		"nothing set": {
			edit: func(o *Options) { *o = Options{} },
			want: []string{"node name", "kube client", "devices must not be empty", "kubelet directory", "CDI directory"},
		},
		"a long kubelet directory": {
			edit: func(o *Options) { o.KubeletDir = "/" + strings.Repeat("k", 80) },
			want: []string{"more than a unix socket address holds"},
		},
		"a device without uuid": {
			edit: func(o *Options) { o.Devices[0].Attributes = nil },
			want: []string{"device gpu-0 has no uuid"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			o := ok
			o.Devices = testDevices()
			tc.edit(&o)
			err := o.validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate passed, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestStartRegistersAtTheKubeletsRoot plays the kubelet's plugin watcher:
// it finds the registration socket under the kubelet's root, asks for the
// plugin's info and tells it it is registered; the node's ResourceSlice is
// published through the client.
func TestStartRegistersAtTheKubeletsRoot(t *testing.T) {
	root := shortDir(t)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}
	cs := fake.NewClientset(node)
	p, err := Start(t.Context(), Options{
		NodeName: testNode, KubeClient: cs, Devices: testDevices(), KubeletDir: root, CDIDir: filepath.Join(root, "cdi"),
		Log: testr.New(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)

	conn, err := grpc.NewClient("unix://"+filepath.Join(root, "plugins_registry", "gpu.nvidia.com-reg.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	info, err := reg.GetInfo(t.Context(), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != registerapi.DRAPlugin || info.Name != DriverName || info.Endpoint != filepath.Join(root, "plugins", DriverName, "dra.sock") {
		t.Errorf("info = %+v, want a DRA plugin %s at <root>/plugins/%s/dra.sock", info, DriverName, DriverName)
	}
	if _, err := os.Stat(info.Endpoint); err != nil {
		t.Errorf("the DRA socket: %v", err)
	}
	if _, err := reg.NotifyRegistrationStatus(t.Context(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	slices, err := cs.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 1 {
		t.Fatalf("%d slices, want 1", len(slices.Items))
	}
	s := slices.Items[0].Spec
	if s.Driver != DriverName || s.Pool.Name != testNode || s.NodeName == nil || *s.NodeName != testNode {
		t.Errorf("slice spec: driver %s, pool %s, node %v; want %s, %s, %s", s.Driver, s.Pool.Name, s.NodeName, DriverName, testNode, testNode)
	}
	if diff := cmp.Diff(testDevices(), s.Devices); diff != "" {
		t.Errorf("published devices (-want +got):\n%s", diff)
	}
}

func TestWaitReadyFailsWhenTheKubeletRefuses(t *testing.T) {
	p := newTestPlugin(t)
	p.opts.KubeClient = fake.NewClientset()
	p.registered = &registerapi.RegistrationStatus{Error: "no such driver version"}
	err := p.WaitReady(t.Context(), 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "no such driver version") {
		t.Errorf("WaitReady = %v, want the kubelet's refusal", err)
	}
}
