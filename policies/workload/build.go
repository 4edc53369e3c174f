package workload

import (
	"math"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// Build returns the view of s. It never fails: what s lacks reads as empty.
func Build(s Source) *View {
	obj := s.Object
	if obj == nil {
		obj = &metav1.ObjectMeta{}
	}
	pod := s.PodMeta
	if pod == nil {
		pod = obj
	}
	spec := s.PodSpec
	if spec == nil {
		spec = &corev1.PodSpec{}
	}
	var owner, team string
	injected := false
	if s.Sealed {
		owner, team = obj.Labels[annotations.OwnerLabel], obj.Labels[annotations.TeamLabel]
		// Parsing the record is left out when no policy reads it.
		injected = (s.Reads == nil || s.Reads("injected")) && validRecord(obj.Annotations[annotations.Injected])
	}
	devices, unresolved := claimDevices(&s, spec)
	v := &View{
		Kind:                s.Kind,
		APIVersion:          s.APIVersion,
		Name:                obj.Name,
		Namespace:           obj.Namespace,
		Operation:           s.Operation,
		Labels:              orEmpty(obj.Labels),
		Annotations:         orEmpty(obj.Annotations),
		PodLabels:           orEmpty(pod.Labels),
		PodAnnotations:      orEmpty(pod.Annotations),
		UserInfo:            UserInfo{Username: s.UserInfo.Username, Groups: s.UserInfo.Groups, UID: s.UserInfo.UID},
		NamespaceLabels:     orEmpty(s.NamespaceLabels),
		Owner:               owner,
		Team:                team,
		Injected:            injected,
		ServingContainer:    s.ServingContainer,
		HostNetwork:         spec.HostNetwork,
		HostPID:             spec.HostPID,
		HostIPC:             spec.HostIPC,
		Containers:          containers(spec.Containers, s.GPU.ResourceName, devices),
		InitContainers:      containers(spec.InitContainers, s.GPU.ResourceName, devices),
		EphemeralContainers: ephemeralContainers(spec.EphemeralContainers),
		GPU:                 gpu(spec, s.Settings.GPU, s.GPU),
		Model:               model(s.Settings.Model),
		Engine:              string(s.Settings.Serving.Engine),
	}
	if v.UserInfo.Groups == nil {
		v.UserInfo.Groups = []string{}
	}
	v.GPU.Devices, v.GPU.UnresolvedClaims = orNone(devices), orNone(unresolved)
	v.GPU.Count = podGPUs(v, spec)
	if s.Claim != nil {
		// A claim or template: what it asks for, and no pod.
		v.GPU.Devices = orNone(requestsOf(obj.Name, s.Claim, s.GPU.GPUDeviceClasses))
		v.GPU.Claims = []string{obj.Name}
		v.GPU.Count = gpuDevices(v.GPU.Devices)
	}
	v.Serving = v.Engine != ""
	return v
}

// orEmpty returns m, or an empty map for nil, so that the view says {}.
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// orNone returns l, or an empty slice for nil, so that the view says [].
func orNone[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

func containers(cs []corev1.Container, gpuName corev1.ResourceName, devices []Device) []Container {
	out := make([]Container, len(cs))
	for i := range cs {
		c := &cs[i]
		ports := make([]int32, len(c.Ports))
		for j, p := range c.Ports {
			ports[j] = p.ContainerPort
		}
		var sc corev1.SecurityContext
		if c.SecurityContext != nil {
			sc = *c.SecurityContext
		}
		out[i] = Container{
			Name:            c.Name,
			Image:           c.Image,
			GPUs:            gpus(c, gpuName) + claimGPUs(c, devices),
			Claims:          claimNames(c),
			Resources:       Resources{Limits: quantities(c.Resources.Limits), Requests: quantities(c.Resources.Requests)},
			SecurityContext: sc,
			Privileged:      sc.Privileged != nil && *sc.Privileged,
			Ports:           ports,
			ReadinessProbe:  c.ReadinessProbe != nil,
			StartupProbe:    c.StartupProbe != nil,
			LivenessProbe:   c.LivenessProbe != nil,
		}
	}
	return out
}

// quantities is l with each quantity in its canonical string form.
func quantities(l corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// gpus is the container's count of the GPU resource: its limit, else its
// request (extended resources must have them equal when both are set).
func gpus(c *corev1.Container, name corev1.ResourceName) int64 {
	var n int64
	if name != "" {
		n = quantity(c, name)
	}
	// Each MIG instance (nvidia.com/mig-1g.10gb, ...) is a GPU device the
	// container holds, whatever the configured resource.
	for r, q := range c.Resources.Limits {
		if isMIG(r) && r != name {
			n += q.Value()
		}
	}
	for r, q := range c.Resources.Requests {
		if _, limited := c.Resources.Limits[r]; !limited && isMIG(r) && r != name {
			n += q.Value()
		}
	}
	return n
}

// quantity is the resource's limit, else its request; 0 when neither.
func quantity(c *corev1.Container, name corev1.ResourceName) int64 {
	if q, ok := c.Resources.Limits[name]; ok {
		return q.Value()
	}
	if q, ok := c.Resources.Requests[name]; ok {
		return q.Value()
	}
	return 0
}

// migPrefix starts NVIDIA's MIG resources under the device plugin's mixed
// strategy.
const migPrefix = "nvidia.com/mig-"

func isMIG(r corev1.ResourceName) bool { return strings.HasPrefix(string(r), migPrefix) }

// claimNames are the names of the resource claims (dynamic resource
// allocation) a container uses.
func claimNames(c *corev1.Container) []string {
	out := make([]string, len(c.Resources.Claims))
	for i, rc := range c.Resources.Claims {
		out[i] = rc.Name
	}
	return out
}

// podClaims are the names of the pod's resource claims.
func podClaims(spec *corev1.PodSpec) []string {
	out := make([]string, len(spec.ResourceClaims))
	for i, rc := range spec.ResourceClaims {
		out[i] = rc.Name
	}
	return out
}

// ephemeralContainers are the pod's ephemeral containers (kubectl debug) in
// the view's container form: they hold no resources of their own.
func ephemeralContainers(es []corev1.EphemeralContainer) []Container {
	cs := make([]corev1.Container, len(es))
	for i := range es {
		cs[i] = corev1.Container(es[i].EphemeralContainerCommon)
	}
	return containers(cs, "", nil)
}

// podGPUs is the pod's effective GPU request, by the rule Kubernetes
// schedules with: app containers and sidecars (restartable init containers)
// run together; a regular init container runs alone beside the sidecars
// started before it. Without sidecars that is the sum over app containers,
// at least the largest init container's.
func podGPUs(v *View, spec *corev1.PodSpec) int64 {
	var running, sidecars, initPeak int64
	for _, c := range v.Containers {
		running += c.GPUs
	}
	for i, c := range v.InitContainers {
		if p := spec.InitContainers[i].RestartPolicy; p != nil && *p == corev1.ContainerRestartPolicyAlways {
			sidecars += c.GPUs
			initPeak = max(initPeak, sidecars)
			continue
		}
		initPeak = max(initPeak, sidecars+c.GPUs)
	}
	return max(running+sidecars, initPeak)
}

func gpu(spec *corev1.PodSpec, set annotations.GPUSettings, keys GPUKeys) GPU {
	g := GPU{Resource: string(keys.ResourceName), Products: set.Products, MemoryMiB: set.MinMemoryMiB, Claims: podClaims(spec)}
	terms := requiredTerms(spec)
	if len(g.Products) == 0 {
		g.Products = affinityProducts(terms, keys.ProductLabel)
	}
	if g.MemoryMiB <= 0 {
		g.MemoryMiB = affinityMemoryMiB(terms, keys.MemoryLabel)
	}
	return g
}

// requiredTerms are the node selector terms of the pod's required node
// affinity that can match a node: a term with no requirements matches none,
// so it places the pod nowhere and is left out.
func requiredTerms(spec *corev1.PodSpec) []corev1.NodeSelectorTerm {
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var out []corev1.NodeSelectorTerm
	for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// affinityProducts are the products the terms admit, sorted and unique:
// terms are ORed, so the union over terms; requirements within a term are
// ANDed, so the intersection of its In lists. A term without an In on the
// label admits any product, and so does the pod: the result is then empty
// (unconstrained), never a list the pod can escape.
func affinityProducts(terms []corev1.NodeSelectorTerm, label string) []string {
	if label == "" || len(terms) == 0 {
		return []string{}
	}
	var union []string
	for _, t := range terms {
		var in []string
		constrained := false
		for _, r := range t.MatchExpressions {
			if r.Key != label || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if !constrained {
				in, constrained = slices.Clone(r.Values), true
				continue
			}
			in = slices.DeleteFunc(in, func(p string) bool { return !slices.Contains(r.Values, p) })
		}
		if !constrained {
			return []string{}
		}
		union = append(union, in...)
	}
	slices.Sort(union)
	return append([]string{}, slices.Compact(union)...)
}

// affinityMemoryMiB is the memory per GPU every admitted node has at least:
// within a term the largest "Gt n" (as n+1), across the ORed terms the
// smallest. A term without a parsable Gt on the label admits any memory,
// and the result is then 0 (unconstrained).
func affinityMemoryMiB(terms []corev1.NodeSelectorTerm, label string) int64 {
	if label == "" || len(terms) == 0 {
		return 0
	}
	var least int64 = -1
	for _, t := range terms {
		var most int64
		for _, r := range t.MatchExpressions {
			if r.Key != label || r.Operator != corev1.NodeSelectorOpGt || len(r.Values) != 1 {
				continue
			}
			n, err := strconv.ParseInt(r.Values[0], 10, 64)
			if err != nil || n == math.MaxInt64 {
				continue
			}
			most = max(most, n+1)
		}
		if most == 0 {
			return 0
		}
		if least < 0 || most < least {
			least = most
		}
	}
	return max(least, 0)
}

func model(m *annotations.ModelSettings) *Model {
	if m == nil {
		return nil
	}
	u := m.URI
	out := &Model{
		URI: u.Raw, Scheme: string(u.Scheme), Path: u.Path, Claim: u.Claim,
		Revision: u.Revision, Tag: u.Tag, Digest: u.Digest, Pinned: u.Pinned(),
	}
	switch u.Scheme {
	case annotations.SchemeS3, annotations.SchemeGS:
		out.Bucket = u.Host
	case annotations.SchemeHTTPS, annotations.SchemeOCI:
		out.Host = u.Host
	case annotations.SchemeHF:
		out.Org, _, _ = strings.Cut(u.Path, "/")
	}
	return out
}

// validRecord reports whether s is an injection record: a JSON object
// naming at least one mutator. The record is sealed, so modelgate wrote it:
// the one-pass decoder, which also refuses duplicate names, is enough.
func validRecord(s string) bool {
	var r struct {
		Mutators []string `json:"mutators"`
	}
	return jsonv2.Unmarshal([]byte(s), &r) == nil && len(r.Mutators) > 0
}
