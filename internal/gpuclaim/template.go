// Package gpuclaim builds the ResourceClaimTemplate modelgate's GPU
// annotations stand for under dynamic resource allocation
// (resource.k8s.io/v1): one request for the count, with CEL selectors on
// the driver's product attribute and memory capacity. The template's name
// is a digest of its spec, so the webhook (which writes the name into the
// Pod) and the controller (which creates the template in the Pod's
// namespace) arrive at the same one without talking to each other.
package gpuclaim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// Names modelgate gives the claim, its request and its templates.
const (
	// ClaimName is the Pod's spec.resourceClaims entry, and the serving
	// container's resources.claims entry.
	ClaimName = "modelgate-gpu"
	// RequestName is the template's one device request.
	RequestName = "gpu"
	// TemplatePrefix starts the name of every template modelgate makes.
	TemplatePrefix = "modelgate-gpu-"
	// TemplateLabel, on a Pod or pod template, names the template its
	// claim is made from: the controller watches the Pods that carry it
	// and creates the template where it is missing.
	TemplateLabel = "resource.modelgate.io/gpu-claim-template"
	// ManagedByLabel marks the templates modelgate made (value
	// "modelgate"), for people and for the controller's watch. Anyone can
	// write it: only SealAnnotation proves that modelgate made a template.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is ManagedByLabel's value.
	ManagedBy = "modelgate"
	// RequestAnnotation, on a template, says in words what it asks for.
	RequestAnnotation = "resource.modelgate.io/gpu-request"
)

// Options name the DRA driver's device class, attributes and products.
type Options struct {
	// Driver is the DRA driver's name, the domain of its attributes and
	// capacities in CEL (gpu.nvidia.com).
	Driver string
	// DeviceClassName is the DeviceClass the request names.
	DeviceClassName string
	// ProductAttribute is the device attribute holding the product name
	// (productName).
	ProductAttribute string
	// MemoryCapacity is the device capacity holding the memory per GPU
	// (memory).
	MemoryCapacity string
	// Products maps modelgate.io/gpu-product's values (the node label
	// values of GPU Feature Discovery, NVIDIA-H100-80GB-HBM3) to the
	// driver's product attribute (NVIDIA H100 80GB HBM3).
	Products map[string]string
}

// DefaultOptions are NVIDIA's DRA driver's names, with the products of its
// data-centre GPUs as GPU Feature Discovery labels them and as NVML (and so
// the driver's productName attribute) names them.
func DefaultOptions() Options {
	return Options{
		Driver:           "gpu.nvidia.com",
		DeviceClassName:  "gpu.nvidia.com",
		ProductAttribute: "productName",
		MemoryCapacity:   "memory",
		Products:         DefaultProducts(),
	}
}

// DefaultProducts is NVIDIA's table of GPU Feature Discovery labels to
// NVML product names.
func DefaultProducts() map[string]string {
	return map[string]string{
		"NVIDIA-A10":            "NVIDIA A10",
		"NVIDIA-A10G":           "NVIDIA A10G",
		"NVIDIA-A100-PCIE-40GB": "NVIDIA A100-PCIE-40GB",
		"NVIDIA-A100-80GB-PCIe": "NVIDIA A100 80GB PCIe",
		"NVIDIA-A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
		"NVIDIA-A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB",
		"NVIDIA-B200":           "NVIDIA B200",
		"NVIDIA-GH200-480GB":    "NVIDIA GH200 480GB",
		"NVIDIA-H100-80GB-HBM3": "NVIDIA H100 80GB HBM3",
		"NVIDIA-H100-NVL":       "NVIDIA H100 NVL",
		"NVIDIA-H100-PCIe":      "NVIDIA H100 PCIe",
		"NVIDIA-H200":           "NVIDIA H200",
		"NVIDIA-H200-NVL":       "NVIDIA H200 NVL",
		"NVIDIA-L4":             "NVIDIA L4",
		"NVIDIA-L40":            "NVIDIA L40",
		"NVIDIA-L40S":           "NVIDIA L40S",
		"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
		"Tesla-T4":             "Tesla T4",
		"Tesla-V100-SXM2-16GB": "Tesla V100-SXM2-16GB",
		"Tesla-V100-SXM2-32GB": "Tesla V100-SXM2-32GB",
	}
}

// ErrUnknownProduct is a product the Options cannot map to the driver's
// attribute.
var ErrUnknownProduct = errors.New("no DRA product name for this GPU product")

// ProductError names a product Options.Products does not map.
type ProductError struct {
	Product string
	// Known are the products that are mapped, sorted.
	Known []string
}

func (e *ProductError) Error() string {
	return fmt.Sprintf("%v %q: the Configuration's injection.gpu.dra.products maps %s",
		ErrUnknownProduct, e.Product, strings.Join(e.Known, ", "))
}

// Unwrap makes errors.Is find ErrUnknownProduct.
func (e *ProductError) Unwrap() error { return ErrUnknownProduct }

// Spec is the claim the GPU settings stand for: Count devices of the
// device class, of one of the products (mapped to the driver's attribute)
// and with at least MinMemoryMiB of memory each. A product the Options do
// not map is a *ProductError.
func Spec(g annotations.GPUSettings, o Options) (resourcev1.ResourceClaimTemplateSpec, error) {
	var sel []resourcev1.DeviceSelector
	if len(g.Products) > 0 {
		names := make([]string, 0, len(g.Products))
		for _, p := range g.Products {
			n, ok := o.Products[p]
			if !ok {
				return resourcev1.ResourceClaimTemplateSpec{}, &ProductError{Product: p, Known: slices.Sorted(maps.Keys(o.Products))}
			}
			names = append(names, strconv.Quote(n))
		}
		attrs := fmt.Sprintf("device.attributes[%s]", strconv.Quote(o.Driver))
		sel = append(sel, cel(fmt.Sprintf("%s in %s && %s.%s in [%s]",
			strconv.Quote(o.ProductAttribute), attrs, attrs, o.ProductAttribute, strings.Join(names, ", "))))
	}
	if g.MinMemoryMiB > 0 {
		caps := fmt.Sprintf("device.capacity[%s]", strconv.Quote(o.Driver))
		sel = append(sel, cel(fmt.Sprintf("%s in %s && %s.%s.compareTo(quantity(%q)) >= 0",
			strconv.Quote(o.MemoryCapacity), caps, caps, o.MemoryCapacity, strconv.FormatInt(g.MinMemoryMiB, 10)+"Mi")))
	}
	return resourcev1.ResourceClaimTemplateSpec{
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: RequestName,
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: o.DeviceClassName,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           g.Count,
				Selectors:       sel,
			},
		}}}},
	}, nil
}

func cel(expr string) resourcev1.DeviceSelector {
	return resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: expr}}
}

// Name is the name of the template with this spec: TemplatePrefix, the
// count, and a digest of the spec.
func Name(spec resourcev1.ResourceClaimTemplateSpec) string {
	// The spec holds plain data: marshalling cannot fail.
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	var count int64
	if r := spec.Spec.Devices.Requests; len(r) > 0 && r[0].Exactly != nil {
		count = r[0].Exactly.Count
	}
	return TemplatePrefix + strconv.FormatInt(count, 10) + "-" + hex.EncodeToString(sum[:5])
}

// Template is the template the GPU settings stand for in a namespace,
// labelled as modelgate's and annotated with what it asks for; Seal adds
// the proof that modelgate made it.
func Template(namespace string, g annotations.GPUSettings, o Options) (*resourcev1.ResourceClaimTemplate, error) {
	spec, err := Spec(g, o)
	if err != nil {
		return nil, err
	}
	return &resourcev1.ResourceClaimTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: resourcev1.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        Name(spec),
			Namespace:   namespace,
			Labels:      map[string]string{ManagedByLabel: ManagedBy},
			Annotations: map[string]string{RequestAnnotation: Describe(g)},
		},
		Spec: spec,
	}, nil
}

// Describe says in words what the settings ask for: "2 GPUs of
// NVIDIA-H100-80GB-HBM3, at least 81920 MiB each".
func Describe(g annotations.GPUSettings) string {
	var b strings.Builder
	b.WriteString(strconv.FormatInt(g.Count, 10))
	if g.Count == 1 {
		b.WriteString(" GPU")
	} else {
		b.WriteString(" GPUs")
	}
	if len(g.Products) > 0 {
		b.WriteString(" of " + strings.Join(g.Products, " or "))
	}
	if g.MinMemoryMiB > 0 {
		b.WriteString(", at least " + strconv.FormatInt(g.MinMemoryMiB, 10) + " MiB each")
	}
	return b.String()
}
