package mutators

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
)

// The parts of a GPU claim (dynamic resource allocation):
//
//	resourceClaim/<claim>=<template>   spec.resourceClaims entry
//	claim/<container>/<claim>          the container's resources.claims entry
//	label/<key>                        the pod (template) label naming the template
const (
	partResourceClaim = "resourceClaim"
	partClaim         = "claim"
	partLabel         = "label"
)

// allocation is how the pod gets its GPUs: the object's (or its
// profile's) modelgate.io/gpu-allocation, else the Configuration's.
func allocation(in *Input) annotations.Allocation {
	if a := in.Settings.GPU.Allocation; a != "" {
		return a
	}
	if in.Options != nil && in.Options.GPU.Allocation != "" {
		return in.Options.GPU.Allocation
	}
	return annotations.AllocationDevicePlugin
}

// claimGPUs gives the serving container c the GPUs through a resource
// claim: the pod's spec.resourceClaims entry gpuclaim.ClaimName made from
// the template the settings stand for, the container's resources.claims
// entry for it, and the pod label gpuclaim.TemplateLabel that makes the
// controller create the template. It returns the parts it keeps (for
// releaseGPU) and reports whether the spec changed.
func claimGPUs(t *Target, in *Input, c *corev1.Container) ([]string, bool, error) {
	spec, err := gpuclaim.Spec(claimSettings(in.Settings.GPU), in.Options.GPU.DRA)
	if err != nil {
		var pe *gpuclaim.ProductError
		if errors.As(err, &pe) {
			return nil, false, invalid(productError(in.Settings.Origin(annotations.GPUProduct), pe))
		}
		return nil, false, err
	}
	name := gpuclaim.Name(spec)
	keep := []string{
		part(partResourceClaim, gpuclaim.ClaimName+"="+name),
		part(partClaim, c.Name, gpuclaim.ClaimName),
		part(partLabel, gpuclaim.TemplateLabel),
	}
	g := claimSettings(in.Settings.GPU)
	t.gpuClaim = &g
	changed := setPodClaim(t.PodSpec, name)
	changed = setContainerClaim(c) || changed
	changed = setLabel(t.PodMeta(), gpuclaim.TemplateLabel, name) || changed
	for _, p := range keep {
		t.Own(p)
	}
	return keep, changed, nil
}

// claimSettings are the GPU settings a claim template stands for: the
// count, products and memory, not how they are allocated.
func claimSettings(g annotations.GPUSettings) annotations.GPUSettings {
	return annotations.GPUSettings{Count: g.Count, Products: g.Products, MinMemoryMiB: g.MinMemoryMiB}
}

// productError reports a product the DRA product table does not map, on
// modelgate.io/gpu-product as the object (or its profile) sets it.
func productError(o annotations.Origin, pe *gpuclaim.ProductError) *field.Error {
	detail := fmt.Sprintf("%s %q has no DRA product name for %s=%s; products the Configuration's injection.gpu.dra.products maps: %s",
		annotations.GPUProduct, pe.Product, annotations.GPUAllocation, annotations.AllocationDRA, strings.Join(pe.Known, ", "))
	if o.Profile != "" {
		return field.Invalid(o.Path, o.Profile, fmt.Sprintf("profile %q: %s", o.Profile, detail))
	}
	return field.Invalid(o.Path, pe.Product, detail)
}

// setPodClaim makes the pod's claim gpuclaim.ClaimName come from the
// template; it reports whether the spec changed.
func setPodClaim(spec *corev1.PodSpec, template string) bool {
	want := corev1.PodResourceClaim{Name: gpuclaim.ClaimName, ResourceClaimTemplateName: &template}
	i := slices.IndexFunc(spec.ResourceClaims, func(rc corev1.PodResourceClaim) bool { return rc.Name == gpuclaim.ClaimName })
	if i < 0 {
		spec.ResourceClaims = append(spec.ResourceClaims, want)
		return true
	}
	cur := spec.ResourceClaims[i]
	if cur.ResourceClaimName == nil && cur.ResourceClaimTemplateName != nil && *cur.ResourceClaimTemplateName == template {
		return false
	}
	spec.ResourceClaims[i] = want
	return true
}

// setContainerClaim makes the container use the pod's claim
// gpuclaim.ClaimName.
func setContainerClaim(c *corev1.Container) bool {
	if slices.ContainsFunc(c.Resources.Claims, isGPUClaim) {
		return false
	}
	c.Resources.Claims = append(c.Resources.Claims, corev1.ResourceClaim{Name: gpuclaim.ClaimName})
	return true
}

func isGPUClaim(rc corev1.ResourceClaim) bool {
	return rc.Name == gpuclaim.ClaimName && rc.Request == ""
}

// releaseClaims removes the claim parts an earlier pass created that are
// not in keep.
func releaseClaims(t *Target, in *Input, keep []string) bool {
	spec := t.PodSpec
	changed := false
	for _, rest := range in.Previous.ownedOf(partResourceClaim) {
		if slices.Contains(keep, part(partResourceClaim, rest)) {
			continue
		}
		name, template, _ := strings.Cut(rest, "=")
		i := slices.IndexFunc(spec.ResourceClaims, func(rc corev1.PodResourceClaim) bool {
			return rc.Name == name && rc.ResourceClaimName == nil &&
				rc.ResourceClaimTemplateName != nil && *rc.ResourceClaimTemplateName == template
		})
		if i >= 0 {
			spec.ResourceClaims = deleteAt(spec.ResourceClaims, i)
			changed = true
		}
	}
	for _, rest := range in.Previous.ownedOf(partClaim) {
		if slices.Contains(keep, part(partClaim, rest)) {
			continue
		}
		container, name, _ := strings.Cut(rest, "/")
		c := containerNamed(spec, container)
		if c == nil {
			continue
		}
		if i := slices.IndexFunc(c.Resources.Claims, func(rc corev1.ResourceClaim) bool {
			return rc.Name == name && rc.Request == ""
		}); i >= 0 {
			c.Resources.Claims = deleteAt(c.Resources.Claims, i)
			changed = true
		}
	}
	for _, key := range in.Previous.ownedOf(partLabel) {
		if slices.Contains(keep, part(partLabel, key)) {
			continue
		}
		changed = setLabel(t.PodMeta(), key, "") || changed
	}
	return changed
}
