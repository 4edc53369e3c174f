package workload

import (
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
)

// ClaimResolver finds what a pod's resource claim asks for: the requests
// of the ResourceClaimTemplate or ResourceClaim it names, from a cache (the
// webhook's informers) or the manifests at hand (the CLI). It reports false
// when it does not know the claim's template or claim.
type ClaimResolver interface {
	ClaimSpec(namespace string, c corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool)
}

// Device is one device request of a pod's resource claims, as the view
// names it: a GPU request (of a device class the Configuration counts as
// GPUs: NVIDIA's full GPUs and MIG instances by default) or another
// driver's device (a NIC, an FPGA).
type Device struct {
	// Claim is the pod's claim (spec.resourceClaims[].name), Request the
	// request's name in it.
	Claim   string `json:"claim"`
	Request string `json:"request"`
	// DeviceClass is the request's device class; for a request with
	// alternatives (firstAvailable), the first GPU class among them, else
	// the first.
	DeviceClass string `json:"deviceClass"`
	// AllocationMode is ExactCount or All.
	AllocationMode string `json:"allocationMode"`
	// Count is the devices asked for under ExactCount (the most of any
	// alternative); 0 under All, which takes every matching device of a
	// node.
	Count int64 `json:"count"`
	// GPU reports a device class the Configuration counts as GPUs.
	GPU bool `json:"gpu"`
}

// claimDevices are the device requests of the pod's claims, in spec order,
// and the claims whose requests are not known (no template or claim found:
// it may have been created a moment ago, or never).
func claimDevices(s *Source, spec *corev1.PodSpec) (devices []Device, unresolved []string) {
	// modelgate's own template, worked out from the sealed record only
	// for a pod that has claims.
	var own *ownTemplate
	if len(spec.ResourceClaims) > 0 {
		own = ownClaimTemplate(s)
	}
	for _, pc := range spec.ResourceClaims {
		// What exists wins: a template of modelgate's name that someone
		// else wrote is judged by what it asks for. Where none exists yet
		// (modelgate's controller creates it once the Pod is there), the
		// settings say what it will ask for.
		var cs *resourcev1.ResourceClaimSpec
		if s.Claims != nil {
			if found, ok := s.Claims.ClaimSpec(objectNamespace(s), pc); ok {
				cs = found
			}
		}
		if cs == nil && own != nil && pc.ResourceClaimName == nil && pc.ResourceClaimTemplateName != nil &&
			*pc.ResourceClaimTemplateName == own.name {
			cs = &own.spec.Spec
		}
		if cs == nil {
			if _, asAdmitted := s.Claims.(createdBefore); asAdmitted {
				// Not one the Pod can be shown to have been admitted
				// with: it asks for nothing, so that no violation it
				// gives now reads as one the Pod already had.
				continue
			}
			unresolved = append(unresolved, pc.Name)
			continue
		}
		devices = append(devices, requestsOf(pc.Name, cs, s.GPU.GPUDeviceClasses)...)
	}
	return devices, unresolved
}

// ownTemplate is the template modelgate's settings stand for.
type ownTemplate struct {
	name string
	spec resourcev1.ResourceClaimTemplateSpec
}

// ownClaimTemplate is the template of the GPU claim modelgate added, as
// its sealed injection record says; nil when there is none, or the record
// is not modelgate's. A claim that names it is known without a lookup: the
// controller creates the template once the Pod exists.
func ownClaimTemplate(s *Source) *ownTemplate {
	if !s.Sealed || s.Object == nil || s.GPU.DRA.DeviceClassName == "" {
		return nil
	}
	g := RecordGPUClaim(s.Object.Annotations[annotations.Injected])
	if g == nil || g.Count <= 0 {
		return nil
	}
	spec, err := gpuclaim.Spec(*g, s.GPU.DRA)
	if err != nil {
		return nil
	}
	return &ownTemplate{name: gpuclaim.Name(spec), spec: spec}
}

// RecordGPUClaim is what the GPU claim an injection record names asks for,
// nil when the record names none (or is not a record). Callers check the
// seal first.
func RecordGPUClaim(record string) *annotations.GPUSettings {
	if record == "" {
		return nil
	}
	var r struct {
		GPUClaim *annotations.GPUSettings `json:"gpuClaim"`
	}
	if jsonv2.Unmarshal([]byte(record), &r) != nil {
		return nil
	}
	return r.GPUClaim
}

func objectNamespace(s *Source) string {
	if s.Object == nil {
		return ""
	}
	return s.Object.Namespace
}

// requestsOf turns a claim spec's requests into the view's devices.
func requestsOf(claim string, cs *resourcev1.ResourceClaimSpec, gpuClasses []string) []Device {
	out := make([]Device, 0, len(cs.Devices.Requests))
	for _, r := range cs.Devices.Requests {
		d := Device{Claim: claim, Request: r.Name}
		if e := r.Exactly; e != nil {
			d.DeviceClass, d.AllocationMode, d.Count = e.DeviceClassName, allocationMode(e.AllocationMode), exactCount(e.AllocationMode, e.Count)
		}
		for i, sub := range r.FirstAvailable {
			gpu := slices.Contains(gpuClasses, sub.DeviceClassName)
			if i == 0 || (gpu && !slices.Contains(gpuClasses, d.DeviceClass)) {
				d.DeviceClass = sub.DeviceClassName
			}
			mode := allocationMode(sub.AllocationMode)
			if mode == string(resourcev1.DeviceAllocationModeAll) {
				d.AllocationMode = mode
			} else if d.AllocationMode == "" {
				d.AllocationMode = mode
			}
			d.Count = max(d.Count, exactCount(sub.AllocationMode, sub.Count))
		}
		if d.AllocationMode == string(resourcev1.DeviceAllocationModeAll) {
			d.Count = 0
		}
		d.GPU = slices.Contains(gpuClasses, d.DeviceClass)
		if !d.GPU {
			for _, sub := range r.FirstAvailable {
				d.GPU = d.GPU || slices.Contains(gpuClasses, sub.DeviceClassName)
			}
		}
		out = append(out, d)
	}
	return out
}

// allocationMode is the mode, ExactCount when unset (the API's default).
func allocationMode(m resourcev1.DeviceAllocationMode) string {
	if m == "" {
		return string(resourcev1.DeviceAllocationModeExactCount)
	}
	return string(m)
}

// exactCount is the count of an ExactCount request, 1 when unset (the
// API's default); 0 under All.
func exactCount(m resourcev1.DeviceAllocationMode, n int64) int64 {
	if m == resourcev1.DeviceAllocationModeAll {
		return 0
	}
	if n <= 0 {
		return 1
	}
	return n
}

// gpuDevices is how many GPUs the devices ask for: the count of every GPU
// request (0 under All).
func gpuDevices(devices []Device) int64 {
	var n int64
	for _, d := range devices {
		if d.GPU {
			n += d.Count
		}
	}
	return n
}

// claimGPUs is how many GPUs the container's claims hold: for each entry
// of its resources.claims, the GPU devices of that claim (one request of
// it when the entry names one, else all).
func claimGPUs(c *corev1.Container, devices []Device) int64 {
	var n int64
	for _, rc := range c.Resources.Claims {
		for _, d := range devices {
			if d.GPU && d.Claim == rc.Name && (rc.Request == "" || rc.Request == d.Request) {
				n += d.Count
			}
		}
	}
	return n
}
