package workload

import (
	"encoding/binary"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	corev1 "k8s.io/api/core/v1"
)

// AppendKey appends to buf an encoding of the top-level keys for which read
// reports true (every key when read is nil): the DecisionCache's key. Two
// views that append the same bytes have the same ValueOf(read), so a
// decision made on one holds for the other; the encoding is written
// straight from the fields, without building the value. Each field is
// tagged and length-prefixed, so no two different views run together into
// the same bytes; a test changes every field in turn to prove that
// whatever changes the value changes the key.
func (v *View) AppendKey(buf []byte, read func(key string) bool) []byte {
	e := keyEncoder(buf)
	for i, k := range topKeys {
		if read != nil && !read(topKeyNames[i]) {
			continue
		}
		e = append(e, byte(i))
		e = v.appendTop(e, k)
	}
	return e
}

// topKeyNames are topKeys as Go strings.
var topKeyNames = func() []string {
	out := make([]string, len(topKeys))
	for i, k := range topKeys {
		out[i] = string(k.Value.(ast.String))
	}
	return out
}()

// keyEncoder is the byte form AppendKey writes.
type keyEncoder []byte

func (v *View) appendTop(e keyEncoder, k *ast.Term) keyEncoder {
	switch k {
	case keyKind:
		return e.str(v.Kind)
	case keyAPIVersion:
		return e.str(v.APIVersion)
	case keyName:
		return e.str(v.Name)
	case keyNamespace:
		return e.str(v.Namespace)
	case keyOperation:
		return e.str(v.Operation)
	case keyLabels:
		return e.strMap(v.Labels)
	case keyAnnotations:
		return e.strMap(v.Annotations)
	case keyPodLabels:
		return e.strMap(v.PodLabels)
	case keyPodAnnotations:
		return e.strMap(v.PodAnnotations)
	case keyUserInfo:
		return strs(e.str(v.UserInfo.Username), v.UserInfo.Groups).str(v.UserInfo.UID)
	case keyNamespaceLabels:
		return e.strMap(v.NamespaceLabels)
	case keyOwner:
		return e.str(v.Owner)
	case keyTeam:
		return e.str(v.Team)
	case keyInjected:
		return e.bool(v.Injected)
	case keyServingContainer:
		return e.str(v.ServingContainer)
	case keyHostNetwork:
		return e.bool(v.HostNetwork)
	case keyHostPID:
		return e.bool(v.HostPID)
	case keyHostIPC:
		return e.bool(v.HostIPC)
	case keyContainers:
		return e.containers(v.Containers)
	case keyInitContainers:
		return e.containers(v.InitContainers)
	case keyEphemeralContainers:
		return e.containers(v.EphemeralContainers)
	case keyGPU:
		g := &v.GPU
		e = strs(e.str(g.Resource).int(g.Count), g.Products).int(g.MemoryMiB)
		e = strs(e, g.Claims).devices(g.Devices)
		return strs(e, g.UnresolvedClaims)
	case keyModel:
		return e.model(v.Model)
	case keyEngine:
		return e.str(v.Engine)
	case keyServing:
		return e.bool(v.Serving)
	}
	panic("workload: no key for a top-level key")
}

func (e keyEncoder) len(n int) keyEncoder { return binary.AppendUvarint(e, uint64(n)) } //nolint:gosec // n is always a len(), never negative

func (e keyEncoder) str(s string) keyEncoder { return append(e.len(len(s)), s...) }

func (e keyEncoder) int(n int64) keyEncoder { return binary.AppendVarint(e, n) }

func (e keyEncoder) bool(b bool) keyEncoder {
	if b {
		return append(e, 1)
	}
	return append(e, 0)
}

// present writes whether a nil-able value is there: nil is null in the
// view, not an empty value.
func (e keyEncoder) present(ok bool) keyEncoder { return e.bool(ok) }

func (e keyEncoder) strMap(m map[string]string) keyEncoder {
	if e = e.present(m != nil); m == nil {
		return e
	}
	e = e.len(len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e = e.str(k).str(m[k])
	}
	return e
}

func strs[S ~string](e keyEncoder, ss []S) keyEncoder {
	if e = e.present(ss != nil); ss == nil {
		return e
	}
	e = e.len(len(ss))
	for _, s := range ss {
		e = e.str(string(s))
	}
	return e
}

func (e keyEncoder) optStr(s *string) keyEncoder {
	if e = e.present(s != nil); s == nil {
		return e
	}
	return e.str(*s)
}

func (e keyEncoder) optBool(b *bool) keyEncoder {
	if e = e.present(b != nil); b == nil {
		return e
	}
	return e.bool(*b)
}

func (e keyEncoder) optInt(n *int64) keyEncoder {
	if e = e.present(n != nil); n == nil {
		return e
	}
	return e.int(*n)
}

func (e keyEncoder) model(m *Model) keyEncoder {
	if e = e.present(m != nil); m == nil {
		return e
	}
	return e.str(m.URI).str(m.Scheme).str(m.Bucket).str(m.Host).str(m.Path).str(m.Org).
		str(m.Claim).str(m.Revision).str(m.Tag).str(m.Digest).bool(m.Pinned)
}

func (e keyEncoder) devices(ds []Device) keyEncoder {
	if e = e.present(ds != nil); ds == nil {
		return e
	}
	e = e.len(len(ds))
	for i := range ds {
		d := &ds[i]
		e = e.str(d.Claim).str(d.Request).str(d.DeviceClass).str(d.AllocationMode).int(d.Count).bool(d.GPU)
	}
	return e
}

func (e keyEncoder) containers(cs []Container) keyEncoder {
	if e = e.present(cs != nil); cs == nil {
		return e
	}
	e = e.len(len(cs))
	for i := range cs {
		c := &cs[i]
		e = strs(e.str(c.Name).str(c.Image).int(c.GPUs), c.Claims)
		e = e.strMap(c.Resources.Limits).strMap(c.Resources.Requests)
		e = e.securityContext(&c.SecurityContext).bool(c.Privileged)
		if e = e.present(c.Ports != nil); c.Ports != nil {
			e = e.len(len(c.Ports))
			for _, p := range c.Ports {
				e = e.int(int64(p))
			}
		}
		e = e.bool(c.ReadinessProbe).bool(c.StartupProbe).bool(c.LivenessProbe)
	}
	return e
}

func (e keyEncoder) securityContext(sc *corev1.SecurityContext) keyEncoder {
	if c := sc.Capabilities; c != nil {
		e = strs(strs(e.present(true), c.Add), c.Drop)
	} else {
		e = e.present(false)
	}
	e = e.optBool(sc.Privileged)
	if o := sc.SELinuxOptions; o != nil {
		e = e.present(true).str(o.User).str(o.Role).str(o.Type).str(o.Level)
	} else {
		e = e.present(false)
	}
	if o := sc.WindowsOptions; o != nil {
		e = e.present(true).optStr(o.GMSACredentialSpecName).optStr(o.GMSACredentialSpec).optStr(o.RunAsUserName).optBool(o.HostProcess)
	} else {
		e = e.present(false)
	}
	e = e.optInt(sc.RunAsUser).optInt(sc.RunAsGroup).optBool(sc.RunAsNonRoot).optBool(sc.ReadOnlyRootFilesystem).optBool(sc.AllowPrivilegeEscalation)
	e = e.optStr((*string)(sc.ProcMount))
	if p := sc.SeccompProfile; p != nil {
		e = e.present(true).str(string(p.Type)).optStr(p.LocalhostProfile)
	} else {
		e = e.present(false)
	}
	if p := sc.AppArmorProfile; p != nil {
		e = e.present(true).str(string(p.Type)).optStr(p.LocalhostProfile)
	} else {
		e = e.present(false)
	}
	return e
}
