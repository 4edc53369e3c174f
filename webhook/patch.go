package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/mutators"
)

// The JSON patch is built from the sections of the object that mutators
// may change, compared before and after the chain, instead of encoding the
// whole object twice and diffing: its cost does not grow with the parts of
// the pod modelgate does not touch, and fields inside untouched sections
// (including ones this build of modelgate does not know) are never
// re-encoded.
//
// The sections are, for every metadata the target carries, its labels and
// annotations; in the pod spec, initContainers, volumes, tolerations,
// affinity and resourceClaims; and in the serving container, in every container the previous
// Injected record names and in every container that mounts model-store,
// resources, env, volumeMounts, ports, readinessProbe and startupProbe. A
// mutator must change nothing else: the golden tests
// (webhook/testdata/golden) check the patch against whole expected objects.

// snapshot holds copies of the mutable sections taken before the chain.
type snapshot struct {
	labels, annotations []map[string]string
	initContainers      []corev1.Container
	volumes             []corev1.Volume
	tolerations         []corev1.Toleration
	affinity            *corev1.Affinity
	resourceClaims      []corev1.PodResourceClaim
	containers          []containerSections
}

// containerSections are a container's mutable fields, and its index.
type containerSections struct {
	index          int
	resources      corev1.ResourceRequirements
	env            []corev1.EnvVar
	volumeMounts   []corev1.VolumeMount
	ports          []corev1.ContainerPort
	readinessProbe *corev1.Probe
	startupProbe   *corev1.Probe
}

func takeSections(i int, c *corev1.Container) containerSections {
	return containerSections{
		index:          i,
		resources:      *c.Resources.DeepCopy(),
		env:            slices.Clone(c.Env),
		volumeMounts:   slices.Clone(c.VolumeMounts),
		ports:          slices.Clone(c.Ports),
		readinessProbe: c.ReadinessProbe.DeepCopy(),
		startupProbe:   c.StartupProbe.DeepCopy(),
	}
}

// takeSnapshot copies the sections. Slices are cloned (mutators replace
// their elements whole); affinity and the containers' sections, which
// mutators edit in place, are deep-copied. serving is the serving
// container's index (or mutators.NoContainer) and prev the record the
// object carried before the chain.
func takeSnapshot(t *mutators.Target, serving int, prev mutators.Record) *snapshot {
	metas := t.Metas()
	s := &snapshot{
		labels:      make([]map[string]string, len(metas)),
		annotations: make([]map[string]string, len(metas)),
	}
	for i, m := range metas {
		s.labels[i] = maps.Clone(m.Labels)
		s.annotations[i] = maps.Clone(m.Annotations)
	}
	spec := t.PodSpec
	s.initContainers = slices.Clone(spec.InitContainers)
	s.volumes = slices.Clone(spec.Volumes)
	s.tolerations = slices.Clone(spec.Tolerations)
	s.affinity = spec.Affinity.DeepCopy()
	s.resourceClaims = slices.Clone(spec.ResourceClaims)
	recorded := prev.Containers()
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if i == serving || slices.Contains(recorded, c.Name) || mountsModel(c) {
			s.containers = append(s.containers, takeSections(i, c))
		}
	}
	return s
}

func mountsModel(c *corev1.Container) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == mutators.ModelVolumeName })
}

// buildPatch compares the target with the snapshot and returns the JSON
// patch operations that turn the admitted object into the mutated one.
func buildPatch(s *snapshot, t *mutators.Target, metaPaths []*field.Path) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	for i, m := range t.Metas() {
		base := pointer(metaPaths[i])
		ops = mapOp(ops, base+"/labels", s.labels[i], m.Labels)
		ops = mapOp(ops, base+"/annotations", s.annotations[i], m.Annotations)
	}
	spec := t.PodSpec
	specPath := strings.TrimSuffix(pointer(metaPaths[len(metaPaths)-1]), "metadata") + "spec"
	ops = namedListOps(ops, specPath+"/initContainers", s.initContainers, spec.InitContainers,
		func(c corev1.Container) string { return c.Name })
	ops = namedListOps(ops, specPath+"/volumes", s.volumes, spec.Volumes,
		func(v corev1.Volume) string { return v.Name })
	ops = appendOnlyOps(ops, specPath+"/tolerations", s.tolerations, spec.Tolerations)
	if !equality.Semantic.DeepEqual(s.affinity, spec.Affinity) {
		ops = fieldOp(ops, specPath+"/affinity", s.affinity != nil, spec.Affinity != nil, spec.Affinity)
	}
	ops = namedListOps(ops, specPath+"/resourceClaims", s.resourceClaims, spec.ResourceClaims,
		func(c corev1.PodResourceClaim) string { return c.Name })
	for _, before := range s.containers {
		ops = containerOps(ops, specPath+"/containers/"+strconv.Itoa(before.index), before, &spec.Containers[before.index])
	}
	return ops
}

// containerOps patches the mutable sections of one container.
func containerOps(ops []jsonpatch.Operation, cp string, before containerSections, c *corev1.Container) []jsonpatch.Operation {
	if !sameResources(&before.resources, &c.Resources) {
		ops = append(ops, jsonpatch.NewOperation("add", cp+"/resources", c.Resources))
	}
	ops = namedListOps(ops, cp+"/env", before.env, c.Env, func(v corev1.EnvVar) string { return v.Name })
	if !equality.Semantic.DeepEqual(before.volumeMounts, c.VolumeMounts) {
		ops = fieldOp(ops, cp+"/volumeMounts", len(before.volumeMounts) > 0, len(c.VolumeMounts) > 0, c.VolumeMounts)
	}
	if !equality.Semantic.DeepEqual(before.ports, c.Ports) {
		ops = fieldOp(ops, cp+"/ports", len(before.ports) > 0, len(c.Ports) > 0, c.Ports)
	}
	if !equality.Semantic.DeepEqual(before.readinessProbe, c.ReadinessProbe) {
		ops = fieldOp(ops, cp+"/readinessProbe", before.readinessProbe != nil, c.ReadinessProbe != nil, c.ReadinessProbe)
	}
	if !equality.Semantic.DeepEqual(before.startupProbe, c.StartupProbe) {
		ops = fieldOp(ops, cp+"/startupProbe", before.startupProbe != nil, c.StartupProbe != nil, c.StartupProbe)
	}
	return ops
}

// sameResources is equality.Semantic.DeepEqual of two containers'
// resources, without reflection: quantities compared by value, an empty
// list the same as none.
func sameResources(a, b *corev1.ResourceRequirements) bool {
	return sameResourceList(a.Limits, b.Limits) && sameResourceList(a.Requests, b.Requests) &&
		(len(a.Claims) == 0 && len(b.Claims) == 0 || slices.Equal(a.Claims, b.Claims))
}

func sameResourceList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if r, ok := b[k]; !ok || q.Cmp(r) != 0 {
			return false
		}
	}
	return true
}

// pointer turns a field path (spec.template.metadata) into a JSON pointer.
// The paths are the decoders' own, a few package variables (decode.Whole),
// so each is turned once and kept (field.Path.String builds the string
// anew on every call); others are not kept.
func pointer(p *field.Path) string {
	if s, ok := pointers.Load(p); ok {
		return s.(string)
	}
	s := "/" + strings.ReplaceAll(p.String(), ".", "/")
	if pointerCount.Add(1) <= maxPointers {
		pointers.Store(p, s)
	}
	return s
}

var (
	// pointers maps a *field.Path to its JSON pointer.
	pointers     sync.Map
	pointerCount atomic.Int32
)

// maxPointers bounds pointers: the decoders have eight paths.
const maxPointers = 64

// fieldOp sets (add) or removes an object member.
func fieldOp(ops []jsonpatch.Operation, path string, had, has bool, value any) []jsonpatch.Operation {
	switch {
	case has:
		return append(ops, jsonpatch.NewOperation("add", path, value))
	case had:
		return append(ops, jsonpatch.NewOperation("remove", path, nil))
	default:
		return ops
	}
}

// mapOp patches a string map (labels, annotations): the keys that changed,
// one by one, when the map is there before and after, so that what
// modelgate did not touch (a large kubectl last-applied-configuration) is
// never sent back; otherwise the map is added or removed whole.
func mapOp(ops []jsonpatch.Operation, path string, before, after map[string]string) []jsonpatch.Operation {
	if maps.Equal(before, after) {
		return ops
	}
	if len(before) == 0 || len(after) == 0 {
		return fieldOp(ops, path, len(before) > 0, len(after) > 0, after)
	}
	// Only the keys that changed are sorted (for a stable patch): the
	// maps' other keys, often many, cost a lookup each.
	var removed, set []string
	for k := range before {
		if _, ok := after[k]; !ok {
			removed = append(removed, k)
		}
	}
	for k, v := range after {
		if was, ok := before[k]; !ok || was != v {
			set = append(set, k)
		}
	}
	slices.Sort(removed)
	slices.Sort(set)
	for _, k := range removed {
		ops = append(ops, jsonpatch.NewOperation("remove", path+"/"+escapePointer(k), nil))
	}
	for _, k := range set {
		ops = append(ops, jsonpatch.NewOperation("add", path+"/"+escapePointer(k), after[k]))
	}
	return ops
}

// escapePointer escapes a map key as a JSON pointer token (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// namedListOps patches a list of named items (init containers, volumes,
// environment variables).
// When the items modelgate did not change keep their order, only the
// changed items are added, replaced or removed, so the others are never
// re-encoded; otherwise the list is replaced whole.
func namedListOps[T any](ops []jsonpatch.Operation, path string, before, after []T, name func(T) string) []jsonpatch.Operation {
	if len(before) == 0 || len(after) == 0 {
		// What the walk below ends in for a list that appears or goes.
		return fieldOp(ops, path, len(before) > 0, len(after) > 0, after)
	}
	if equality.Semantic.DeepEqual(before, after) {
		return ops
	}
	beforeNames := make([]string, len(before))
	for i, v := range before {
		beforeNames[i] = name(v)
	}
	afterNames := make([]string, len(after))
	for i, v := range after {
		afterNames[i] = name(v)
	}
	// Walk both lists; each step is one item replaced, inserted or
	// removed, with indices as they are when the operation applies.
	var itemOps []jsonpatch.Operation
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		switch {
		case i < len(before) && j < len(after) && beforeNames[i] == afterNames[j]:
			if !equality.Semantic.DeepEqual(before[i], after[j]) {
				itemOps = append(itemOps, jsonpatch.NewOperation("replace", path+"/"+strconv.Itoa(j), after[j]))
			}
			i++
			j++
		case j < len(after) && !slices.Contains(beforeNames[i:], afterNames[j]):
			itemOps = append(itemOps, jsonpatch.NewOperation("add", path+"/"+strconv.Itoa(j), after[j]))
			j++
		case i < len(before) && !slices.Contains(afterNames[j:], beforeNames[i]):
			itemOps = append(itemOps, jsonpatch.NewOperation("remove", path+"/"+strconv.Itoa(j), nil))
			i++
		default:
			// Reordered: replace the whole list.
			return fieldOp(ops, path, len(before) > 0, len(after) > 0, after)
		}
	}
	return append(ops, itemOps...)
}

// appendOnlyOps patches a list modelgate only appends to (tolerations):
// the new items are appended; any other change replaces the list.
func appendOnlyOps[T any](ops []jsonpatch.Operation, path string, before, after []T) []jsonpatch.Operation {
	if len(before) == 0 || len(after) == 0 {
		return fieldOp(ops, path, len(before) > 0, len(after) > 0, after)
	}
	if equality.Semantic.DeepEqual(before, after) {
		return ops
	}
	if len(before) > 0 && len(after) > len(before) && equality.Semantic.DeepEqual(before, after[:len(before)]) {
		for _, v := range after[len(before):] {
			ops = append(ops, jsonpatch.NewOperation("add", path+"/-", v))
		}
		return ops
	}
	return fieldOp(ops, path, len(before) > 0, len(after) > 0, after)
}

// encodePatch writes the operations as a JSON patch document. Each value is
// encoded once, straight into one pooled buffer (json.Marshal would copy
// each out of its own; jsonpatch.Operation's MarshalJSON would also
// re-validate and compact the result), by appendValue where it writes the
// value's type and fields, else by encoding/json; the document is copied
// out at its exact size.
func encodePatch(ops []jsonpatch.Operation) ([]byte, error) {
	p := patchBuffers.Get().(*[]byte)
	b := (*p)[:0]
	defer func() {
		if cap(b) <= maxPooledBuffer {
			*p = b[:0]
			patchBuffers.Put(p)
		}
	}()
	b = append(b, '[')
	for i, op := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"op":`...)
		b = appendJSONString(b, op.Operation)
		b = append(b, `,"path":`...)
		b = appendJSONString(b, op.Path)
		if op.Operation != "remove" {
			b = append(b, `,"value":`...)
			var ok bool
			if b, ok = appendValue(b, op.Value); !ok {
				v, err := json.Marshal(op.Value)
				if err != nil {
					return nil, fmt.Errorf("encoding %s: %w", op.Path, err)
				}
				b = append(b, v...)
			}
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	patch := bytes.Clone(b)
	if verifyPatchEncoding != nil {
		verifyPatchEncoding(ops, patch)
	}
	return patch, nil
}

// patchBuffers are reused buffers for encodePatch.
var patchBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 8<<10) // a typical injection's patch, 4.5 KB, fits
	return &b
}}

// verifyPatchEncoding, set by the tests, is handed every patch encoded,
// with its operations, to check it against encoding/json's encoding.
var verifyPatchEncoding func(ops []jsonpatch.Operation, patch []byte)

// appendJSONString appends s as a JSON string. A patch's operations and
// paths are printable ASCII but for a map key the object brought, which
// encoding/json escapes (strconv.Quote's escapes, such as \x00, are not
// JSON).
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// buffers are reused encoding buffers.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuffer is the largest buffer kept for reuse: one that grew for
// a rare large review goes back to the heap.
const maxPooledBuffer = 1 << 20

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	buffers.Put(b)
}

// patchResponse allows the request with a JSON patch already encoded.
func patchResponse(patch []byte, reason string) admission.Response {
	pt := admissionv1.PatchTypeJSONPatch
	resp := admission.Allowed(reason)
	resp.Patch = patch
	resp.PatchType = &pt
	return resp
}
