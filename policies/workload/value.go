package workload

import (
	"math"
	"strconv"

	"github.com/open-policy-agent/opa/v1/ast"
	corev1 "k8s.io/api/core/v1"
)

// Value returns v in OPA's value form: the same value as v's JSON decoded by
// OPA (a nil map or slice is null, as in JSON), built directly. Terms for
// keys and common scalars are shared between values, as OPA's own interned
// terms are; the result must not be mutated.
func (v *View) Value() ast.Value { return v.ValueOf(nil) }

// ValueOf is Value with only the top-level keys for which read reports
// true (every key when read is nil): what no policy reads is not built.
func (v *View) ValueOf(read func(key string) bool) ast.Value {
	b := &builder{}
	items := make([][2]*ast.Term, 0, len(topKeys))
	for i, k := range topKeys {
		if read == nil || read(string(k.Value.(ast.String))) {
			items = append(items, ast.Item(k, v.top(b, i)))
		}
	}
	return ast.NewObject(items...)
}

// topKeys are the view's top-level keys; top builds the value of each.
var topKeys = []*ast.Term{
	keyKind, keyAPIVersion, keyName, keyNamespace, keyOperation,
	keyLabels, keyAnnotations, keyPodLabels, keyPodAnnotations, keyUserInfo,
	keyNamespaceLabels, keyOwner, keyTeam, keyInjected, keyServingContainer,
	keyHostNetwork, keyHostPID, keyHostIPC,
	keyContainers, keyInitContainers, keyEphemeralContainers,
	keyGPU, keyModel, keyEngine, keyServing,
}

// top is the value of topKeys[i].
func (v *View) top(b *builder, i int) *ast.Term {
	switch topKeys[i] {
	case keyKind:
		return b.str(v.Kind)
	case keyAPIVersion:
		return b.str(v.APIVersion)
	case keyName:
		return b.str(v.Name)
	case keyNamespace:
		return b.str(v.Namespace)
	case keyOperation:
		return b.str(v.Operation)
	case keyLabels:
		return b.stringMap(v.Labels)
	case keyAnnotations:
		return b.stringMap(v.Annotations)
	case keyPodLabels:
		return b.stringMap(v.PodLabels)
	case keyPodAnnotations:
		return b.stringMap(v.PodAnnotations)
	case keyUserInfo:
		return b.object(
			ast.Item(keyUsername, b.str(v.UserInfo.Username)),
			ast.Item(keyGroups, stringArray(b, v.UserInfo.Groups)),
			ast.Item(keyUID, b.str(v.UserInfo.UID)),
		)
	case keyNamespaceLabels:
		return b.stringMap(v.NamespaceLabels)
	case keyOwner:
		return b.str(v.Owner)
	case keyTeam:
		return b.str(v.Team)
	case keyInjected:
		return ast.InternedTerm(v.Injected)
	case keyServingContainer:
		return b.str(v.ServingContainer)
	case keyHostNetwork:
		return ast.InternedTerm(v.HostNetwork)
	case keyHostPID:
		return ast.InternedTerm(v.HostPID)
	case keyHostIPC:
		return ast.InternedTerm(v.HostIPC)
	case keyContainers:
		return b.containerArray(v.Containers)
	case keyInitContainers:
		return b.containerArray(v.InitContainers)
	case keyEphemeralContainers:
		return b.containerArray(v.EphemeralContainers)
	case keyGPU:
		return b.object(
			ast.Item(keyResource, b.str(v.GPU.Resource)),
			ast.Item(keyCount, b.num(v.GPU.Count)),
			ast.Item(keyProducts, stringArray(b, v.GPU.Products)),
			ast.Item(keyMemoryMiB, b.num(v.GPU.MemoryMiB)),
			ast.Item(keyClaims, stringArray(b, v.GPU.Claims)),
			ast.Item(keyDevices, b.deviceArray(v.GPU.Devices)),
			ast.Item(keyUnresolvedClaims, stringArray(b, v.GPU.UnresolvedClaims)),
		)
	case keyModel:
		return b.modelTerm(v.Model)
	case keyEngine:
		return b.str(v.Engine)
	case keyServing:
		return ast.InternedTerm(v.Serving)
	}
	panic("workload: no value for top-level key " + topKeys[i].String())
}

// builder hands out the terms of one value from slabs: one allocation for
// many terms instead of one each. A slab lives as long as any of its terms,
// which is as long as the value.
type builder struct {
	slab []ast.Term
}

// slabSize is the terms per slab; the typical one-container serving view
// (with a loader init container) takes about 90.
const slabSize = 64

func (b *builder) term(v ast.Value) *ast.Term {
	if len(b.slab) == 0 {
		b.slab = make([]ast.Term, slabSize)
	}
	t := &b.slab[0]
	t.Value = v
	b.slab = b.slab[1:]
	return t
}

// object is an object term; the empty one is OPA's interned term, shared
// (a container's unset security context, an empty map).
func (b *builder) object(items ...[2]*ast.Term) *ast.Term {
	if len(items) == 0 {
		return ast.InternedEmptyObject
	}
	return b.term(ast.NewObject(items...))
}

// array is an array term; the empty one is OPA's interned term, shared.
func (b *builder) array(terms ...*ast.Term) *ast.Term {
	if len(terms) == 0 {
		return ast.InternedEmptyArray
	}
	return b.term(ast.NewArray(terms...))
}

func (b *builder) modelTerm(m *Model) *ast.Term {
	if m == nil {
		return ast.InternedNullTerm
	}
	return b.object(
		ast.Item(keyURI, b.str(m.URI)),
		ast.Item(keyScheme, b.str(m.Scheme)),
		ast.Item(keyBucket, b.str(m.Bucket)),
		ast.Item(keyHost, b.str(m.Host)),
		ast.Item(keyPath, b.str(m.Path)),
		ast.Item(keyOrg, b.str(m.Org)),
		ast.Item(keyClaim, b.str(m.Claim)),
		ast.Item(keyRevision, b.str(m.Revision)),
		ast.Item(keyTag, b.str(m.Tag)),
		ast.Item(keyDigest, b.str(m.Digest)),
		ast.Item(keyPinned, ast.InternedTerm(m.Pinned)),
	)
}

func (b *builder) deviceArray(ds []Device) *ast.Term {
	if ds == nil {
		return ast.InternedNullTerm
	}
	terms := make([]*ast.Term, len(ds))
	for i := range ds {
		d := &ds[i]
		terms[i] = b.object(
			ast.Item(keyClaim, b.str(d.Claim)),
			ast.Item(keyRequest, b.str(d.Request)),
			ast.Item(keyDeviceClass, b.str(d.DeviceClass)),
			ast.Item(keyAllocationMode, b.str(d.AllocationMode)),
			ast.Item(keyCount, b.num(d.Count)),
			ast.Item(keyGPU, ast.InternedTerm(d.GPU)),
		)
	}
	return ast.ArrayTerm(terms...)
}

func (b *builder) containerArray(cs []Container) *ast.Term {
	if cs == nil {
		return ast.InternedNullTerm
	}
	terms := make([]*ast.Term, len(cs))
	for i := range cs {
		c := &cs[i]
		terms[i] = b.object(
			ast.Item(keyName, b.str(c.Name)),
			ast.Item(keyImage, b.str(c.Image)),
			ast.Item(keyGPUs, b.num(c.GPUs)),
			ast.Item(keyClaims, stringArray(b, c.Claims)),
			ast.Item(keyResources, b.object(
				ast.Item(keyLimits, b.stringMap(c.Resources.Limits)),
				ast.Item(keyRequests, b.stringMap(c.Resources.Requests)),
			)),
			ast.Item(keySecurityContext, b.securityContext(&c.SecurityContext)),
			ast.Item(keyPrivileged, ast.InternedTerm(c.Privileged)),
			ast.Item(keyPorts, b.portArray(c.Ports)),
			ast.Item(keyReadinessProbe, ast.InternedTerm(c.ReadinessProbe)),
			ast.Item(keyStartupProbe, ast.InternedTerm(c.StartupProbe)),
			ast.Item(keyLivenessProbe, ast.InternedTerm(c.LivenessProbe)),
		)
	}
	return b.array(terms...)
}

// num is an integer term, sharing OPA's interned ones for small numbers.
func (b *builder) num(n int64) *ast.Term {
	if n >= 0 && n <= math.MaxInt32 && ast.HasInternedIntNumberTerm(int(n)) {
		return ast.InternedTerm(int(n))
	}
	return b.term(ast.Number(strconv.FormatInt(n, 10)))
}

// str is a string term, sharing OPA's interned one for "".
func (b *builder) str(s string) *ast.Term {
	if s == "" {
		return ast.InternedEmptyString
	}
	return b.term(ast.String(s))
}

func (b *builder) stringMap(m map[string]string) *ast.Term {
	if m == nil {
		return ast.InternedNullTerm
	}
	if len(m) == 0 {
		return ast.InternedEmptyObject
	}
	items := make([][2]*ast.Term, 0, len(m))
	for k, v := range m {
		items = append(items, ast.Item(b.str(k), b.str(v)))
	}
	return b.object(items...)
}

func stringArray[S ~string](b *builder, ss []S) *ast.Term {
	if ss == nil {
		return ast.InternedNullTerm
	}
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = b.str(string(s))
	}
	return b.array(terms...)
}

func (b *builder) portArray(ports []int32) *ast.Term {
	if ports == nil {
		return ast.InternedNullTerm
	}
	terms := make([]*ast.Term, len(ports))
	for i, p := range ports {
		terms[i] = b.num(int64(p))
	}
	return b.array(terms...)
}

// securityContext is sc as Kubernetes writes it in JSON: camelCase keys,
// every field omitted when unset (a test fills every field to prove none is
// missed).
func (b *builder) securityContext(sc *corev1.SecurityContext) *ast.Term {
	var items [][2]*ast.Term
	if c := sc.Capabilities; c != nil {
		var caps [][2]*ast.Term
		if len(c.Add) > 0 {
			caps = append(caps, ast.Item(keyAdd, stringArray(b, c.Add)))
		}
		if len(c.Drop) > 0 {
			caps = append(caps, ast.Item(keyDrop, stringArray(b, c.Drop)))
		}
		items = append(items, ast.Item(keyCapabilities, b.object(caps...)))
	}
	items = b.optBool(items, keyPrivileged, sc.Privileged)
	if o := sc.SELinuxOptions; o != nil {
		var se [][2]*ast.Term
		se = b.optString(se, keyUser, o.User)
		se = b.optString(se, keyRole, o.Role)
		se = b.optString(se, keyType, o.Type)
		se = b.optString(se, keyLevel, o.Level)
		items = append(items, ast.Item(keySELinuxOptions, b.object(se...)))
	}
	if o := sc.WindowsOptions; o != nil {
		var win [][2]*ast.Term
		win = b.optStringPtr(win, keyGMSACredentialSpecName, o.GMSACredentialSpecName)
		win = b.optStringPtr(win, keyGMSACredentialSpec, o.GMSACredentialSpec)
		win = b.optStringPtr(win, keyRunAsUserName, o.RunAsUserName)
		win = b.optBool(win, keyHostProcess, o.HostProcess)
		items = append(items, ast.Item(keyWindowsOptions, b.object(win...)))
	}
	items = b.optInt(items, keyRunAsUser, sc.RunAsUser)
	items = b.optInt(items, keyRunAsGroup, sc.RunAsGroup)
	items = b.optBool(items, keyRunAsNonRoot, sc.RunAsNonRoot)
	items = b.optBool(items, keyReadOnlyRootFilesystem, sc.ReadOnlyRootFilesystem)
	items = b.optBool(items, keyAllowPrivilegeEscalation, sc.AllowPrivilegeEscalation)
	if sc.ProcMount != nil {
		items = append(items, ast.Item(keyProcMount, b.str(string(*sc.ProcMount))))
	}
	if p := sc.SeccompProfile; p != nil {
		items = append(items, ast.Item(keySeccompProfile, b.profile(string(p.Type), p.LocalhostProfile)))
	}
	if p := sc.AppArmorProfile; p != nil {
		items = append(items, ast.Item(keyAppArmorProfile, b.profile(string(p.Type), p.LocalhostProfile)))
	}
	return b.object(items...)
}

// profile is a seccomp or AppArmor profile: a type that is always written
// and an optional localhost profile.
func (b *builder) profile(typ string, localhost *string) *ast.Term {
	items := [][2]*ast.Term{ast.Item(keyType, b.str(typ))}
	return b.object(b.optStringPtr(items, keyLocalhostProfile, localhost)...)
}

func (b *builder) optString(items [][2]*ast.Term, key *ast.Term, s string) [][2]*ast.Term {
	if s == "" {
		return items
	}
	return append(items, ast.Item(key, b.str(s)))
}

func (b *builder) optStringPtr(items [][2]*ast.Term, key *ast.Term, s *string) [][2]*ast.Term {
	if s == nil {
		return items
	}
	return append(items, ast.Item(key, b.str(*s)))
}

func (b *builder) optBool(items [][2]*ast.Term, key *ast.Term, p *bool) [][2]*ast.Term {
	if p == nil {
		return items
	}
	return append(items, ast.Item(key, ast.InternedTerm(*p)))
}

func (b *builder) optInt(items [][2]*ast.Term, key *ast.Term, n *int64) [][2]*ast.Term {
	if n == nil {
		return items
	}
	return append(items, ast.Item(key, b.num(*n)))
}
