package mutators

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/gpuclaim"
)

// GPUPlacementName is the GPUPlacement mutator's stable name.
const GPUPlacementName = "gpu-placement"

// DefaultGPUOptions are NVIDIA's names (the Configuration's defaults).
func DefaultGPUOptions() GPUOptions {
	return GPUOptions{
		ResourceName: config.DefaultGPUResourceName,
		ProductLabel: config.DefaultGPUProductLabel,
		MemoryLabel:  config.DefaultGPUMemoryLabel,
		TaintKey:     config.DefaultGPUTaintKey,
		Allocation:   annotations.AllocationDevicePlugin,
		DRA:          gpuclaim.DefaultOptions(),
	}
}

// GPUPlacement gives the serving container the GPUs modelgate.io/gpu asks
// for and places the pod on nodes that have them:
//
//   - the container's limit and request of the GPU resource are both set to
//     the count (extended resources need them equal), unless the container
//     declares a count of its own: that one wins over a profile's default
//     (Warnings says so) and is never recorded as modelgate's, and the
//     object's own modelgate.io/gpu that contradicts it is an invalid
//     object naming both;
//   - a required node affinity: the product label In the products of
//     modelgate.io/gpu-product, and the memory label Gt the minimum of
//     modelgate.io/gpu-memory minus one (Gt is strict, so a minimum of 40960
//     MiB becomes Gt 40959, which admits exactly 40960 and above);
//   - a toleration of the GPU taint (Exists, NoSchedule), unless one that
//     covers it is already there.
//
// Affinity the pod already has is kept. Node selector terms are ORed, so the
// GPU requirements are ANDed into every term; preferred terms and pod
// (anti-)affinity are not touched. Empty terms match no node and stay
// empty: filling them in would widen the pod's placement.
//
// On a GPU pod modelgate owns the requirements "product label In" and
// "memory label Gt": a later pass replaces their values instead of stacking
// a second requirement. Users who want their own product constraint write
// modelgate.io/gpu-product rather than a node affinity on the product label.
//
// What modelgate sets it records in the Injected record (quantities with
// their value, requirements by label and operator, the toleration), so that
// a later pass can take it out again: when modelgate.io/gpu goes (or the
// object opts out) the quantities it set, its requirements and its
// toleration are removed, and terms or an affinity left empty by that go
// too; when the product or memory annotation goes, its requirement goes. A
// quantity the user has since changed is theirs and stays.
//
// A pod that asks for no GPUs, and never did, is left alone.
type GPUPlacement struct{}

var _ Mutator = GPUPlacement{}

// Name implements Mutator.
func (GPUPlacement) Name() string { return GPUPlacementName }

// Mutate implements Mutator.
func (GPUPlacement) Mutate(t *Target, in *Input) (bool, error) {
	g := in.Settings.GPU
	if g.Count <= 0 || in.Container == NoContainer {
		changed := releaseGPU(t, in, nil)
		return releaseClaims(t, in, nil) || changed, nil
	}
	if in.Options == nil {
		return false, errNoOptions
	}
	o := in.Options.GPU
	if o.ResourceName == "" {
		return false, fmt.Errorf("%w: no GPU resource name", errGPUOptions)
	}
	c, err := servingContainer(t, in)
	if err != nil {
		return false, err
	}
	if allocation(in) == annotations.AllocationDRA {
		if _, declared := declaredGPUs(c, in, o.ResourceName); !declared {
			return claimGPU(t, in, c)
		}
		if in.Settings.Explicit(annotations.GPUAllocation) {
			return false, invalid(draConflict(in.Settings.Origin(annotations.GPUAllocation), c.Name, o.ResourceName))
		}
		// The container asks the device plugin itself, and the platform's
		// default of DRA does not override what the user wrote.
	}
	reqs, err := gpuRequirements(g.Products, g.MinMemoryMiB, o)
	if err != nil {
		return false, err
	}

	count := *resource.NewQuantity(g.Count, resource.DecimalSI)
	limits := quantityPart(partLimits, c.Name, o.ResourceName, count)
	requests := quantityPart(partRequests, c.Name, o.ResourceName, count)
	// A count the container declares itself wins over a profile's default
	// and contradicts the object's own annotation.
	setCount := true
	if declared, ok := declaredGPUs(c, in, o.ResourceName); ok && declared.Cmp(count) != 0 {
		if in.Settings.Explicit(annotations.GPU) {
			return false, invalid(gpuConflict(in.Settings.Origin(annotations.GPU), g.Count, c.Name, o.ResourceName, declared))
		}
		setCount = false
	}
	var keep []string
	if setCount {
		keep = append(keep, limits, requests)
	}
	for _, r := range reqs {
		keep = append(keep, affinityPart(r))
	}
	tolerate := ""
	if o.TaintKey != "" {
		tolerate = part(partToleration, string(corev1.TaintEffectNoSchedule), o.TaintKey)
		keep = append(keep, tolerate)
	}
	changed := releaseGPU(t, in, keep)
	changed = releaseClaims(t, in, nil) || changed

	if setCount {
		changed = ownQuantity(t, in, &c.Resources.Limits, limits, o.ResourceName, count) || changed
		changed = ownQuantity(t, in, &c.Resources.Requests, requests, o.ResourceName, count) || changed
	}
	changed = requireOnNodes(t.PodSpec, reqs) || changed
	for _, r := range reqs {
		t.Own(affinityPart(r))
	}
	if tolerate != "" {
		changed = ownToleration(t, in, tolerate, o.TaintKey) || changed
	}
	return changed, nil
}

// claimGPU gives the container its GPUs through a claim, with the GPU
// taint's toleration (GPU node pools stay tainted whichever way their GPUs
// are handed out), and takes out what an earlier device-plugin pass set.
func claimGPU(t *Target, in *Input, c *corev1.Container) (bool, error) {
	// Products are checked before anything changes: an error leaves the
	// target as it was.
	keep, changed, err := claimGPUs(t, in, c)
	if err != nil {
		return false, err
	}
	key := in.Options.GPU.TaintKey
	tolerate := ""
	if key != "" {
		tolerate = part(partToleration, string(corev1.TaintEffectNoSchedule), key)
	}
	changed = releaseGPU(t, in, []string{tolerate}) || changed
	changed = releaseClaims(t, in, keep) || changed
	if tolerate != "" {
		changed = ownToleration(t, in, tolerate, key) || changed
	}
	return changed, nil
}

// draConflict reports modelgate.io/gpu-allocation: dra, as the object
// sets it, against a container that asks the device plugin for GPUs.
func draConflict(o annotations.Origin, container string, name corev1.ResourceName) *field.Error {
	return field.Invalid(o.Path, string(annotations.AllocationDRA), fmt.Sprintf(
		"container %q declares %s in its resources, which the device plugin allocates; remove it, or set %s to %s",
		container, name, annotations.GPUAllocation, annotations.AllocationDevicePlugin))
}

// declaredGPUs is the count of the GPU resource the container declares
// itself: its limit, else its request, where modelgate did not set it (as
// the previous record says, with the value it set).
func declaredGPUs(c *corev1.Container, in *Input, name corev1.ResourceName) (resource.Quantity, bool) {
	for _, l := range []struct {
		kind string
		list corev1.ResourceList
	}{{partLimits, c.Resources.Limits}, {partRequests, c.Resources.Requests}} {
		q, ok := l.list[name]
		if !ok || in.Previous.Owned(quantityPart(l.kind, c.Name, name, q)) {
			continue
		}
		return q, true
	}
	return resource.Quantity{}, false
}

// gpuConflict reports modelgate.io/gpu, as the object sets it, against the
// count the serving container declares itself.
func gpuConflict(o annotations.Origin, count int64, container string, name corev1.ResourceName, declared resource.Quantity) *field.Error {
	return field.Invalid(o.Path, strconv.FormatInt(count, 10), fmt.Sprintf(
		"contradicts container %q, which declares %s: %s in its resources; set %s to %s or remove it, or remove the container's own %s",
		container, name, declared.String(), annotations.GPU, declared.String(), name))
}

// quantityPart names a resource quantity modelgate set on a container.
func quantityPart(kind, container string, name corev1.ResourceName, q resource.Quantity) string {
	return part(kind, container, string(name)+"="+q.String())
}

// affinityPart names a node requirement modelgate owns.
func affinityPart(r corev1.NodeSelectorRequirement) string {
	return part(partNodeAffinity, string(r.Operator), r.Key)
}

// ownQuantity sets l[name] to q. The quantity is modelgate's (owned) when
// this pass set it, or an earlier pass did and it is unchanged; a value the
// user wrote that already equals q stays theirs.
func ownQuantity(t *Target, in *Input, l *corev1.ResourceList, p string, name corev1.ResourceName, q resource.Quantity) bool {
	changed := setQuantity(l, name, q)
	if changed || in.Previous.Owned(p) {
		t.Own(p)
	}
	return changed
}

// ownToleration adds the GPU taint's toleration unless one that covers it
// is there; the one an earlier pass added stays modelgate's.
func ownToleration(t *Target, in *Input, p, key string) bool {
	spec := t.PodSpec
	if in.Previous.Owned(p) && slices.ContainsFunc(spec.Tolerations, isGPUToleration(key, corev1.TaintEffectNoSchedule)) {
		t.Own(p)
		return false
	}
	if toleratesTaint(spec.Tolerations, key, corev1.TaintEffectNoSchedule) {
		return false
	}
	spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
		Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
	t.Own(p)
	return true
}

// isGPUToleration matches exactly the toleration modelgate adds.
func isGPUToleration(key string, effect corev1.TaintEffect) func(corev1.Toleration) bool {
	return func(t corev1.Toleration) bool {
		return t.Key == key && t.Operator == corev1.TolerationOpExists && t.Effect == effect &&
			t.Value == "" && t.TolerationSeconds == nil
	}
}

var (
	errNoOptions   = errors.New("no platform options")
	errGPUOptions  = errors.New("incomplete GPU options")
	errNoContainer = errors.New("no serving container")
)

// servingContainer returns the container Input.Container names.
func servingContainer(t *Target, in *Input) (*corev1.Container, error) {
	if in.Container < 0 || in.Container >= len(t.PodSpec.Containers) {
		return nil, fmt.Errorf("%w at index %d: the pod has %d containers",
			errNoContainer, in.Container, len(t.PodSpec.Containers))
	}
	return &t.PodSpec.Containers[in.Container], nil
}

// setQuantity sets l[name] to q and reports whether it changed.
func setQuantity(l *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) bool {
	if cur, ok := (*l)[name]; ok && cur.Cmp(q) == 0 {
		return false
	}
	if *l == nil {
		*l = corev1.ResourceList{}
	}
	(*l)[name] = q
	return true
}

// gpuRequirements are the node requirements for the products and the
// minimum memory per GPU, in the order they are added.
func gpuRequirements(products []string, minMemoryMiB int64, o GPUOptions) ([]corev1.NodeSelectorRequirement, error) {
	var reqs []corev1.NodeSelectorRequirement
	if len(products) > 0 {
		if o.ProductLabel == "" {
			return nil, fmt.Errorf("%w: no GPU product label", errGPUOptions)
		}
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: o.ProductLabel, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(products),
		})
	}
	if minMemoryMiB > 0 {
		if o.MemoryLabel == "" {
			return nil, fmt.Errorf("%w: no GPU memory label", errGPUOptions)
		}
		// Gt is strict: "at least m" is "greater than m-1".
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: o.MemoryLabel, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(minMemoryMiB-1, 10)},
		})
	}
	return reqs, nil
}

// requireOnNodes ANDs the requirements into every non-empty term of the
// pod's required node affinity, creating the affinity (one term) when the
// pod has none. It reports whether the spec changed.
func requireOnNodes(spec *corev1.PodSpec, reqs []corev1.NodeSelectorRequirement) bool {
	if len(reqs) == 0 {
		return false
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	created := len(sel.NodeSelectorTerms) == 0
	if created {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	changed := created
	for i := range sel.NodeSelectorTerms {
		term := &sel.NodeSelectorTerms[i]
		if !created && len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			// An empty term the pod came with matches no node; keep it so.
			continue
		}
		for _, r := range reqs {
			changed = setRequirement(&term.MatchExpressions, r) || changed
		}
	}
	return changed
}

// setRequirement makes want the one requirement of its key and operator in
// exprs: an equal one is kept, one with other values is replaced in place
// (modelgate owns it), further ones are dropped, and want is appended when
// there is none. It reports whether exprs changed.
func setRequirement(exprs *[]corev1.NodeSelectorRequirement, want corev1.NodeSelectorRequirement) bool {
	out := make([]corev1.NodeSelectorRequirement, 0, len(*exprs)+1)
	found, changed := false, false
	for _, e := range *exprs {
		if e.Key != want.Key || e.Operator != want.Operator {
			out = append(out, e)
			continue
		}
		switch {
		case found:
			changed = true // a duplicate: drop it
		case slices.Equal(e.Values, want.Values):
			found = true
			out = append(out, e)
		default:
			found, changed = true, true
			out = append(out, corev1.NodeSelectorRequirement{
				Key: want.Key, Operator: want.Operator, Values: slices.Clone(want.Values)})
		}
	}
	if !found {
		out = append(out, corev1.NodeSelectorRequirement{
			Key: want.Key, Operator: want.Operator, Values: slices.Clone(want.Values)})
		changed = true
	}
	if changed {
		*exprs = out
	}
	return changed
}

// toleratesTaint reports whether a toleration with operator Exists covers
// every taint with the key and effect: the same key or an empty key (which
// tolerates everything), and the same effect or an empty one (all effects).
// An Equal toleration is not enough: the taint's value is unknown.
func toleratesTaint(tols []corev1.Toleration, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(tols, func(t corev1.Toleration) bool {
		return t.Operator == corev1.TolerationOpExists &&
			(t.Key == "" || t.Key == key) &&
			(t.Effect == "" || t.Effect == effect)
	})
}
