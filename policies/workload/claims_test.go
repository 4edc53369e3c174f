package workload

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
)

// claimsIn is a ClaimResolver over templates by name.
type claimsIn map[string]resourcev1.ResourceClaimSpec

func (m claimsIn) ClaimSpec(ns string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool) {
	if ns != "team-a" || c.ResourceClaimTemplateName == nil {
		return nil, false
	}
	s, ok := m[*c.ResourceClaimTemplateName]
	return &s, ok
}

func exactly(name, class string, mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: n}}
}

func claimSpec(reqs ...resourcev1.DeviceRequest) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}
}

func TestClaimDevices(t *testing.T) {
	dra := nvidiaDRA()
	own := annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-H100-80GB-HBM3"}, Allocation: annotations.AllocationDRA}
	ownSpec, err := gpuclaim.Spec(own, dra.DRA)
	if err != nil {
		t.Fatal(err)
	}
	ownName := gpuclaim.Name(ownSpec)
	templ := func(name string) *string { return &name }

	cases := map[string]struct {
		record    *annotations.GPUSettings // the sealed record's gpuClaim
		resolver  ClaimResolver
		claims    []corev1.PodResourceClaim
		uses      []corev1.ResourceClaim // the container's
		want      []Device
		wantCount int64
		unknown   []string
		unsealed  bool
	}{
		"modelgate's own template, not created yet": {
			record: &own, claims: []corev1.PodResourceClaim{{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &ownName}},
			uses:      []corev1.ResourceClaim{{Name: gpuclaim.ClaimName}},
			want:      []Device{{Claim: gpuclaim.ClaimName, Request: "gpu", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 2, GPU: true}},
			wantCount: 2,
		},
		"a template of modelgate's name that asks for more is judged by what it asks": {
			record: &own, resolver: claimsIn{ownName: claimSpec(exactly("gpu", "gpu.nvidia.com", "", 8))},
			claims:    []corev1.PodResourceClaim{{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &ownName}},
			uses:      []corev1.ResourceClaim{{Name: gpuclaim.ClaimName}},
			want:      []Device{{Claim: gpuclaim.ClaimName, Request: "gpu", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 8, GPU: true}},
			wantCount: 8,
		},
		"the user's template: MIG counted, a NIC named but not counted, count defaults to 1": {
			resolver: claimsIn{"mixed": claimSpec(exactly("mig", "mig.nvidia.com", "ExactCount", 3), exactly("nic", "rdma.example.com", "", 0))},
			claims:   []corev1.PodResourceClaim{{Name: "accel", ResourceClaimTemplateName: templ("mixed")}},
			uses:     []corev1.ResourceClaim{{Name: "accel"}},
			want: []Device{
				{Claim: "accel", Request: "mig", DeviceClass: "mig.nvidia.com", AllocationMode: "ExactCount", Count: 3, GPU: true},
				{Claim: "accel", Request: "nic", DeviceClass: "rdma.example.com", AllocationMode: "ExactCount", Count: 1},
			},
			wantCount: 3,
		},
		"a container using one request of the claim holds only its GPUs": {
			resolver: claimsIn{"two": claimSpec(exactly("a", "gpu.nvidia.com", "", 2), exactly("b", "gpu.nvidia.com", "", 4))},
			claims:   []corev1.PodResourceClaim{{Name: "c", ResourceClaimTemplateName: templ("two")}},
			uses:     []corev1.ResourceClaim{{Name: "c", Request: "b"}},
			want: []Device{
				{Claim: "c", Request: "a", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 2, GPU: true},
				{Claim: "c", Request: "b", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 4, GPU: true},
			},
			wantCount: 4,
		},
		"All has no count": {
			resolver:  claimsIn{"all": claimSpec(exactly("every", "gpu.nvidia.com", "All", 0))},
			claims:    []corev1.PodResourceClaim{{Name: "c", ResourceClaimTemplateName: templ("all")}},
			uses:      []corev1.ResourceClaim{{Name: "c"}},
			want:      []Device{{Claim: "c", Request: "every", DeviceClass: "gpu.nvidia.com", AllocationMode: "All", GPU: true}},
			wantCount: 0,
		},
		"firstAvailable: the most any alternative asks, under a GPU class": {
			resolver: claimsIn{"alt": claimSpec(resourcev1.DeviceRequest{Name: "g", FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "big", DeviceClassName: "gpu.nvidia.com", Count: 1},
				{Name: "small", DeviceClassName: "mig.nvidia.com", Count: 4},
			}})},
			claims:    []corev1.PodResourceClaim{{Name: "c", ResourceClaimTemplateName: templ("alt")}},
			uses:      []corev1.ResourceClaim{{Name: "c"}},
			want:      []Device{{Claim: "c", Request: "g", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 4, GPU: true}},
			wantCount: 4,
		},
		"a record that is not sealed names nothing": {
			record: &own, unsealed: true,
			claims:  []corev1.PodResourceClaim{{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &ownName}},
			uses:    []corev1.ResourceClaim{{Name: gpuclaim.ClaimName}},
			unknown: []string{gpuclaim.ClaimName},
		},
		"a template nobody can find is unresolved": {
			claims:  []corev1.PodResourceClaim{{Name: "c", ResourceClaimTemplateName: templ("missing")}},
			uses:    []corev1.ResourceClaim{{Name: "c"}},
			unknown: []string{"c"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := &corev1.PodSpec{
				Containers:     []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{Claims: tc.uses}}},
				ResourceClaims: tc.claims,
			}
			meta := &metav1.ObjectMeta{Name: "p", Namespace: "team-a"}
			if tc.record != nil {
				b, err := json.Marshal(map[string]any{"mutators": []string{"gpu-placement"}, "gpuClaim": tc.record})
				if err != nil {
					t.Fatal(err)
				}
				meta.Annotations = map[string]string{annotations.Injected: string(b)}
			}
			v := Build(Source{Object: meta, PodSpec: spec, GPU: dra, Claims: tc.resolver, Sealed: !tc.unsealed})
			if diff := cmp.Diff(orNone(tc.want), v.GPU.Devices); diff != "" {
				t.Errorf("gpu.devices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orNone(tc.unknown), v.GPU.UnresolvedClaims); diff != "" {
				t.Errorf("gpu.unresolvedClaims (-want +got):\n%s", diff)
			}
			if v.GPU.Count != tc.wantCount || v.Containers[0].GPUs != tc.wantCount {
				t.Errorf("gpu.count = %d, containers[0].gpus = %d, want %d", v.GPU.Count, v.Containers[0].GPUs, tc.wantCount)
			}
		})
	}
}

// nvidiaDRA are NVIDIA's names, DRA included.
func nvidiaDRA() GPUKeys {
	return GPUKeys{
		ResourceName: "nvidia.com/gpu", ProductLabel: "nvidia.com/gpu.product", MemoryLabel: "nvidia.com/gpu.memory",
		DRA: gpuclaim.DefaultOptions(), GPUDeviceClasses: []string{"gpu.nvidia.com", "mig.nvidia.com"},
	}
}
