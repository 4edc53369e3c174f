package dradriver

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/internal/gpuclaim"
)

// Names of NVIDIA's DRA driver.
const (
	// Driver is the driver's name, the domain of its attributes.
	Driver = "gpu.nvidia.com"
	// GPUClass and MIGClass are the DeviceClasses of full GPUs and MIG
	// instances.
	GPUClass = "gpu.nvidia.com"
	MIGClass = "mig.nvidia.com"
)

// The GPU Feature Discovery labels a slice is built from.
const (
	labelProduct = "nvidia.com/gpu.product"
	labelMemory  = "nvidia.com/gpu.memory"
	labelFamily  = "nvidia.com/gpu.family"
	labelCount   = "nvidia.com/gpu.count"
	resourceGPU  = corev1.ResourceName("nvidia.com/gpu")
)

// computeCapability is the CUDA compute capability of each architecture.
var computeCapability = map[string]string{
	"blackwell": "10.0.0", "hopper": "9.0.0", "ada-lovelace": "8.9.0", "ampere": "8.0.0", "turing": "7.5.0", "volta": "7.0.0",
}

// DeviceClasses are the classes NVIDIA's chart installs: full GPUs and MIG
// instances of the driver, told apart by the type attribute. The GPU class
// serves nvidia.com/gpu requests on nodes without the device plugin
// (extendedResourceName, KEP-5004, beta and on in Kubernetes 1.36).
func DeviceClasses() []*resourcev1.DeviceClass {
	class := func(name, typ string, extended *string) *resourcev1.DeviceClass {
		return &resourcev1.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].type == %q", Driver, Driver, typ),
			}}}, ExtendedResourceName: extended},
		}
	}
	return []*resourcev1.DeviceClass{class(GPUClass, "gpu", ptr.To(string(resourceGPU))), class(MIGClass, "mig", nil)}
}

// SliceFor is the ResourceSlice NVIDIA's driver would publish for the
// node, nil for a node without nvidia.com/gpu capacity. The product name
// is the driver's (NVML's) for the node's product label, through the
// default product table; a product the table lacks keeps its label value.
func SliceFor(n *corev1.Node) *resourcev1.ResourceSlice {
	q, ok := n.Status.Capacity[resourceGPU]
	if !ok {
		// A node without the device plugin offers its GPUs through DRA
		// only; GPU Feature Discovery's count label says how many.
		q, _ = resource.ParseQuantity(n.Labels[labelCount])
	}
	if q.Value() <= 0 {
		return nil
	}
	product := n.Labels[labelProduct]
	if name, ok := gpuclaim.DefaultProducts()[product]; ok {
		product = name
	}
	family := n.Labels[labelFamily]
	memory := resource.MustParse("0")
	if mib := n.Labels[labelMemory]; mib != "" {
		if m, err := resource.ParseQuantity(mib + "Mi"); err == nil {
			memory = m
		}
	}
	devices := make([]resourcev1.Device, q.Value())
	for i := range devices {
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type":          {StringValue: ptr.To("gpu")},
			"productName":   {StringValue: ptr.To(product)},
			"brand":         {StringValue: ptr.To(brand(product))},
			"uuid":          {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%08x", n.Name, i))},
			"index":         {IntValue: ptr.To(int64(i))},
			"driverVersion": {VersionValue: ptr.To("580.65.6")},
		}
		if family != "" {
			attrs["architecture"] = resourcev1.DeviceAttribute{StringValue: ptr.To(titleCase(family))}
		}
		if cc, ok := computeCapability[family]; ok {
			attrs["cudaComputeCapability"] = resourcev1.DeviceAttribute{VersionValue: ptr.To(cc)}
		}
		devices[i] = resourcev1.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: attrs,
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: memory}},
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-" + strings.ReplaceAll(Driver, ".", "-")},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   Driver,
			Pool:     resourcev1.ResourcePool{Name: n.Name, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(n.Name),
			Devices:  devices,
		},
	}
}

func brand(product string) string {
	if strings.HasPrefix(product, "Tesla") {
		return "Tesla"
	}
	return "Nvidia"
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Publish creates the DeviceClasses and each GPU node's ResourceSlice,
// leaving those that already exist as they are.
func Publish(ctx context.Context, c client.Client, nodes []*corev1.Node) error {
	objs := make([]client.Object, 0, 2+len(nodes))
	for _, dc := range DeviceClasses() {
		objs = append(objs, dc)
	}
	for _, n := range nodes {
		if s := SliceFor(n); s != nil {
			objs = append(objs, s)
		}
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("publishing %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
