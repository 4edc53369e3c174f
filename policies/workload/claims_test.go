package workload

import (
	"encoding/json"
	"testing"
	"time"

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

// Issue 42, item 5: a ResourceClaim or ResourceClaimTemplate is judged
// itself, its view built from the spec it asks for, as a Pod's devices are
// from the claims it names.
func TestClaimView(t *testing.T) {
	cases := map[string]struct {
		spec      resourcev1.ResourceClaimSpec
		want      []Device
		wantCount int64
	}{
		"exact counts of GPUs and MIG add up; a NIC is named, not counted": {
			spec: claimSpec(exactly("gpu", "gpu.nvidia.com", "", 6), exactly("mig", "mig.nvidia.com", "ExactCount", 3), exactly("nic", "rdma.example.com", "", 2)),
			want: []Device{
				{Claim: "big", Request: "gpu", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 6, GPU: true},
				{Claim: "big", Request: "mig", DeviceClass: "mig.nvidia.com", AllocationMode: "ExactCount", Count: 3, GPU: true},
				{Claim: "big", Request: "nic", DeviceClass: "rdma.example.com", AllocationMode: "ExactCount", Count: 2},
			},
			wantCount: 9,
		},
		"a count left unset asks for one": {
			spec:      claimSpec(exactly("gpu", "gpu.nvidia.com", "", 0)),
			want:      []Device{{Claim: "big", Request: "gpu", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 1, GPU: true}},
			wantCount: 1,
		},
		"All has no count": {
			spec:      claimSpec(exactly("every", "gpu.nvidia.com", "All", 0)),
			want:      []Device{{Claim: "big", Request: "every", DeviceClass: "gpu.nvidia.com", AllocationMode: "All", GPU: true}},
			wantCount: 0,
		},
		"firstAvailable: the most any alternative asks": {
			spec: claimSpec(resourcev1.DeviceRequest{Name: "g", FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "big", DeviceClassName: "gpu.nvidia.com", Count: 2},
				{Name: "small", DeviceClassName: "mig.nvidia.com", Count: 7},
			}}),
			want:      []Device{{Claim: "big", Request: "g", DeviceClass: "gpu.nvidia.com", AllocationMode: "ExactCount", Count: 7, GPU: true}},
			wantCount: 7,
		},
		"no requests": {want: []Device{}},
	}
	for name, tc := range cases {
		for _, kind := range []string{"ResourceClaim", "ResourceClaimTemplate"} {
			t.Run(name+"/"+kind, func(t *testing.T) {
				meta := &metav1.ObjectMeta{Name: "big", Namespace: "team-a", Labels: map[string]string{"app": "bench"}}
				v := Build(Source{Kind: kind, APIVersion: "resource.k8s.io/v1", Operation: "CREATE", Object: meta, Claim: &tc.spec, GPU: nvidiaDRA(), UserInfo: alice})
				if diff := cmp.Diff(orNone(tc.want), v.GPU.Devices); diff != "" {
					t.Errorf("gpu.devices (-want +got):\n%s", diff)
				}
				if v.GPU.Count != tc.wantCount {
					t.Errorf("gpu.count = %d, want %d", v.GPU.Count, tc.wantCount)
				}
				if diff := cmp.Diff([]string{"big"}, v.GPU.Claims); diff != "" {
					t.Errorf("gpu.claims (-want +got):\n%s", diff)
				}
				if v.Kind != kind || v.Name != "big" || v.Namespace != "team-a" || v.Labels["app"] != "bench" || v.PodLabels["app"] != "bench" || v.UserInfo.Username != alice.Username {
					t.Errorf("metadata: kind %q name %q namespace %q labels %v podLabels %v user %q", v.Kind, v.Name, v.Namespace, v.Labels, v.PodLabels, v.UserInfo.Username)
				}
				if len(v.Containers) != 0 || len(v.GPU.UnresolvedClaims) != 0 || v.Model != nil || v.Serving {
					t.Errorf("a claim has no pod: containers %v, unresolvedClaims %v, model %v, serving %v", v.Containers, v.GPU.UnresolvedClaims, v.Model, v.Serving)
				}
			})
		}
	}
}

// datedClaims is a DatedClaimResolver over templates by name, each with
// its creation time.
type datedClaims map[string]struct {
	spec    resourcev1.ResourceClaimSpec
	created time.Time
}

func (m datedClaims) ClaimSpec(ns string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool) {
	s, _, ok := m.DatedClaimSpec(ns, c)
	return s, ok
}

func (m datedClaims) DatedClaimSpec(_ string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, time.Time, bool) {
	if c.ResourceClaimTemplateName == nil {
		return nil, time.Time{}, false
	}
	e, ok := m[*c.ResourceClaimTemplateName]
	return &e.spec, e.created, ok
}

// Issue 42, item 5: the old Pod of an UPDATE is judged with the claims it
// can have been admitted with, those created before it: a claim created
// since (deleted and created again asking for more) is unknown to it.
func TestCreatedBefore(t *testing.T) {
	pod := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	spec := claimSpec(exactly("gpu", "gpu.nvidia.com", "", 2))
	dated := datedClaims{
		"earlier": {spec: spec, created: pod.Add(-time.Second)},
		"same":    {spec: spec, created: pod},
		"later":   {spec: spec, created: pod.Add(time.Minute)},
		"undated": {spec: spec},
	}
	cases := map[string]struct {
		resolver ClaimResolver
		at       time.Time
		template string
		want     bool
	}{
		"created before the Pod: known":                     {resolver: dated, at: pod, template: "earlier", want: true},
		"created in the Pod's second: unknown":              {resolver: dated, at: pod, template: "same"},
		"created after the Pod: unknown":                    {resolver: dated, at: pod, template: "later"},
		"no creation time: unknown":                         {resolver: dated, at: pod, template: "undated"},
		"not found: unknown":                                {resolver: dated, at: pod, template: "missing"},
		"a Pod with no creation time knows none":            {resolver: dated, template: "earlier"},
		"a resolver that cannot date its claims knows none": {resolver: claimsIn{"earlier": spec}, at: pod, template: "earlier"},
		"no resolver knows none":                            {at: pod, template: "earlier"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pc := corev1.PodResourceClaim{Name: "c", ResourceClaimTemplateName: &tc.template}
			r := CreatedBefore(tc.resolver, tc.at)
			got, ok := r.ClaimSpec("team-a", pc)
			if ok != tc.want || (ok && got == nil) {
				t.Errorf("found %v (%v), want %v", ok, got, tc.want)
			}
			// In a view, a claim it does not know asks for nothing: no
			// device, and not unresolved.
			v := Build(Source{Object: &metav1.ObjectMeta{Name: "p", Namespace: "team-a"}, GPU: nvidiaDRA(), Claims: r,
				PodSpec: &corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{pc},
					Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "c"}}}}}}})
			wantCount := int64(0)
			if tc.want {
				wantCount = 2
			}
			if v.GPU.Count != wantCount || len(v.GPU.UnresolvedClaims) != 0 {
				t.Errorf("gpu.count %d, unresolvedClaims %v; want %d and none", v.GPU.Count, v.GPU.UnresolvedClaims, wantCount)
			}
		})
	}

	// modelgate's own template, made after the Pod, is known from the
	// Pod's sealed record: what the Pod was admitted asking for.
	own := annotations.GPUSettings{Count: 2, Allocation: annotations.AllocationDRA}
	ownSpec, err := gpuclaim.Spec(own, nvidiaDRA().DRA)
	if err != nil {
		t.Fatal(err)
	}
	ownName := gpuclaim.Name(ownSpec)
	record, err := json.Marshal(map[string]any{"mutators": []string{"gpu-placement"}, "gpuClaim": own})
	if err != nil {
		t.Fatal(err)
	}
	later := datedClaims{ownName: {spec: claimSpec(exactly("gpu", "gpu.nvidia.com", "", 16)), created: pod.Add(time.Minute)}}
	v := Build(Source{
		Object: &metav1.ObjectMeta{Name: "p", Namespace: "team-a", Annotations: map[string]string{annotations.Injected: string(record)}},
		PodSpec: &corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &ownName}},
			Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: gpuclaim.ClaimName}}}}}},
		GPU: nvidiaDRA(), Claims: CreatedBefore(later, pod), Sealed: true,
	})
	if v.GPU.Count != 2 {
		t.Errorf("modelgate's template, created again with 16 after the Pod: gpu.count %d, want the record's 2", v.GPU.Count)
	}
}
