package mutators

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// h100s is two H100s with 80 GiB each, through DRA.
var h100s = annotations.GPUSettings{Count: 2, Products: []string{"NVIDIA-H100-80GB-HBM3"}, MinMemoryMiB: 81920, Allocation: annotations.AllocationDRA}

// templateOf is the name of the template the settings stand for.
func templateOf(t *testing.T, g annotations.GPUSettings) string {
	t.Helper()
	spec, err := gpuclaim.Spec(g, gpuclaim.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return gpuclaim.Name(spec)
}

// claimed is what GPUPlacement does to container i of a pod asking for
// GPUs through DRA: the claim, and the GPU taint's toleration.
func claimed(template string, i int) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.ResourceClaims = append(s.ResourceClaims, corev1.PodResourceClaim{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &template})
		s.Containers[i].Resources.Claims = append(s.Containers[i].Resources.Claims, corev1.ResourceClaim{Name: gpuclaim.ClaimName})
		s.Tolerations = append(s.Tolerations, gpuToleration)
	}
}

func TestGPUPlacementDRA(t *testing.T) {
	h100 := templateOf(t, h100s)
	userClaim := func(s *corev1.PodSpec) {
		name := "rdma"
		s.ResourceClaims = []corev1.PodResourceClaim{{Name: "nic", ResourceClaimTemplateName: &name}}
		s.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "nic"}}
	}
	cases := map[string]struct {
		gpu        annotations.GPUSettings
		allocation annotations.Allocation // the Configuration's
		before     func(*corev1.PodSpec)
		want       func(*corev1.PodSpec)
		wantLabel  string
	}{
		"the object asks for dra": {
			gpu: h100s, want: claimed(h100, 0), wantLabel: h100,
		},
		"the Configuration's default is dra": {
			gpu:        annotations.GPUSettings{Count: 2, Products: h100s.Products, MinMemoryMiB: 81920},
			allocation: annotations.AllocationDRA, want: claimed(h100, 0), wantLabel: h100,
		},
		"the object's device-plugin wins over the Configuration's dra": {
			gpu:        annotations.GPUSettings{Count: 2, Allocation: annotations.AllocationDevicePlugin},
			allocation: annotations.AllocationDRA, want: placed(2),
		},
		"the user's own claims stay, ours is added after them": {
			gpu: h100s, before: userClaim, want: claimed(h100, 0), wantLabel: h100,
		},
		"the serving container is the second": {
			gpu:       annotations.GPUSettings{Count: 1, Allocation: annotations.AllocationDRA},
			before:    twoContainers,
			want:      claimed(templateOf(t, annotations.GPUSettings{Count: 1}), 1),
			wantLabel: templateOf(t, annotations.GPUSettings{Count: 1}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg, want := specTarget("Pod", tc.before, tc.want)
			before := tg.PodSpec.DeepCopy()
			opts := testOptions()
			if tc.allocation != "" {
				opts.GPU.Allocation = tc.allocation
			}
			container := 0
			if len(tg.PodSpec.Containers) > 1 {
				container = 1
			}
			in := &Input{Settings: explicit(annotations.Settings{GPU: tc.gpu}), Container: container, Options: opts}
			changed, err := GPUPlacement{}.Mutate(tg, in)
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			checkSpecChange(t, before, want, tg.PodSpec, changed, true)
			if got := tg.Object.Labels[gpuclaim.TemplateLabel]; got != tc.wantLabel {
				t.Errorf("label %s = %q, want %q", gpuclaim.TemplateLabel, got, tc.wantLabel)
			}
			in.Previous = Record{Owns: tg.owns}
			tg.owns = nil
			if again, err := (GPUPlacement{}).Mutate(tg, in); err != nil || again {
				t.Errorf("second Mutate: changed %v, err %v; want a fixed point", again, err)
			}
		})
	}
}

// The template name is a digest of what it asks for: other settings, other
// template; the same settings, the same template whatever their order.
func TestGPUClaimTemplateNames(t *testing.T) {
	o := gpuclaim.DefaultOptions()
	names := map[string]string{}
	for _, g := range []annotations.GPUSettings{
		{Count: 1}, {Count: 2}, {Count: 2, Products: []string{"NVIDIA-L4"}},
		{Count: 2, Products: []string{"NVIDIA-L4", "NVIDIA-L40S"}}, {Count: 2, Products: []string{"NVIDIA-L4"}, MinMemoryMiB: 1},
	} {
		spec, err := gpuclaim.Spec(g, o)
		if err != nil {
			t.Fatal(err)
		}
		n := gpuclaim.Name(spec)
		if other, dup := names[n]; dup {
			t.Errorf("%s and %s share the template %s", other, gpuclaim.Describe(g), n)
		}
		names[n] = gpuclaim.Describe(g)
		if len(n) > 63 || !strings.HasPrefix(n, gpuclaim.TemplatePrefix) {
			t.Errorf("name %q: want a label value starting %s", n, gpuclaim.TemplatePrefix)
		}
	}
}

func TestGPUPlacementDRAErrors(t *testing.T) {
	productPath := field.NewPath("metadata", "annotations").Key(annotations.GPUProduct)
	allocPath := field.NewPath("metadata", "annotations").Key(annotations.GPUAllocation)
	cases := map[string]struct {
		gpu      annotations.GPUSettings
		declared bool
		want     *field.Error
	}{
		"a product the table does not map": {
			gpu:  annotations.GPUSettings{Count: 1, Products: []string{"NVIDIA-H100-80GB-HBM3", "ACME-X1"}, Allocation: annotations.AllocationDRA},
			want: field.Invalid(productPath, "ACME-X1", ""),
		},
		"dra on a container that asks the device plugin itself": {
			gpu: annotations.GPUSettings{Count: 1, Allocation: annotations.AllocationDRA}, declared: true,
			want: field.Invalid(allocPath, "dra", ""),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tg := newTarget("Pod", builders.Options{})
			if tc.declared {
				setGPUs(&tg.PodSpec.Containers[0], 1)
			}
			before := tg.PodSpec.DeepCopy()
			s := explicit(annotations.Settings{GPU: tc.gpu})
			s.Origins[annotations.GPUProduct] = annotations.Origin{Path: productPath}
			s.Origins[annotations.GPUAllocation] = annotations.Origin{Path: allocPath}
			_, err := GPUPlacement{}.Mutate(tg, &Input{Settings: s, Options: testOptions()})
			var ie *InvalidError
			if !errors.As(err, &ie) || len(ie.Errs) != 1 {
				t.Fatalf("err = %v, want one invalid field", err)
			}
			got := ie.Errs[0]
			if got.Field != tc.want.Field || got.BadValue != tc.want.BadValue {
				t.Errorf("error on %s = %v, want on %s = %v", got.Field, got.BadValue, tc.want.Field, tc.want.BadValue)
			}
			if tc.want.Field == productPath.String() && !strings.Contains(got.Detail, "NVIDIA-H100-80GB-HBM3") {
				t.Errorf("detail %q does not list the products accepted", got.Detail)
			}
			if diff := cmp.Diff(before, tg.PodSpec); diff != "" {
				t.Errorf("a refused pod was changed (-before +after):\n%s", diff)
			}
		})
	}
}

// A pod that moves from DRA to the device plugin and back keeps nothing of
// the other, and opting out takes every part out, label included.
func TestGPUPlacementDRARevert(t *testing.T) {
	for _, kind := range targetKinds {
		t.Run(kind, func(t *testing.T) {
			tg, want := specTarget(kind, nil, nil)
			pass(t, tg, annotations.Settings{GPU: h100s})
			if tg.PodMeta().Labels[gpuclaim.TemplateLabel] == "" || len(tg.PodSpec.ResourceClaims) != 1 {
				t.Fatalf("not claimed: label %v, claims %v", tg.PodMeta().Labels, tg.PodSpec.ResourceClaims)
			}
			res := pass(t, tg, annotations.Settings{})
			if diff := cmp.Diff(want, tg.PodSpec); diff != "" {
				t.Errorf("pod spec after opting out (-want +got):\n%s", diff)
			}
			if _, ok := tg.PodMeta().Labels[gpuclaim.TemplateLabel]; ok {
				t.Errorf("label %s left behind", gpuclaim.TemplateLabel)
			}
			if len(res.Record.Owns) != 0 {
				t.Errorf("Record.Owns = %v, want none", res.Record.Owns)
			}
		})
	}
}
