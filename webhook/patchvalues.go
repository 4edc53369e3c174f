package webhook

import (
	"slices"
	"strconv"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The values of a patch are the sections mutators change (patch.go): the
// loader init container, the model volume, a toleration, the node
// affinity, a container's resources, variables, mounts, ports and probes,
// labels and annotations. appendValue writes them without reflection, the
// bytes encoding/json writes (its field order, omitempty, HTML escaping,
// sorted map keys, the types' own MarshalJSON), for the fields modelgate
// and the manifests it sees set; a value with a field it does not write
// (a lifecycle hook, a NFS volume, a pod anti-affinity, a field a newer
// k8s.io/api adds) is left to encoding/json whole.
// TestPatchValuesAsEncodingJSON holds the two equal on random values of
// every type, and TestPatchValueFieldsKnown fails when a type gains a
// field appendValue neither writes nor refuses; every patch the tests
// encode is checked against encoding/json too (verifyPatchEncoding).

// appendValue appends v as encoding/json encodes it, or reports false,
// with dst unchanged in length, when v is not a value it writes.
func appendValue(dst []byte, v any) ([]byte, bool) {
	n := len(dst)
	var ok bool
	switch v := v.(type) {
	case string:
		return appendString(dst, v), true
	case map[string]string:
		return appendStringMap(dst, v), true
	case []corev1.Container:
		dst, ok = appendList(dst, v, appendContainer)
	case corev1.Container:
		dst, ok = appendContainer(dst, &v)
	case []corev1.Volume:
		dst, ok = appendList(dst, v, appendVolume)
	case corev1.Volume:
		dst, ok = appendVolume(dst, &v)
	case []corev1.Toleration:
		dst, ok = appendList(dst, v, appendToleration)
	case corev1.Toleration:
		dst, ok = appendToleration(dst, &v)
	case *corev1.Affinity:
		dst, ok = appendAffinity(dst, v)
	case corev1.ResourceRequirements:
		dst, ok = appendResources(dst, &v)
	case []corev1.EnvVar:
		dst, ok = appendList(dst, v, appendEnvVar)
	case corev1.EnvVar:
		dst, ok = appendEnvVar(dst, &v)
	case []corev1.VolumeMount:
		dst, ok = appendList(dst, v, appendVolumeMount)
	case []corev1.ContainerPort:
		dst, ok = appendList(dst, v, appendContainerPort)
	case *corev1.Probe:
		if v == nil {
			return append(dst, "null"...), true
		}
		dst, ok = appendProbe(dst, v)
	case []corev1.PodResourceClaim:
		dst, ok = appendList(dst, v, appendPodResourceClaim)
	case corev1.PodResourceClaim:
		dst, ok = appendPodResourceClaim(dst, &v)
	}
	if !ok {
		return dst[:n], false
	}
	return dst, true
}

// appendList appends a slice, null when nil, as encoding/json does.
func appendList[T any](dst []byte, list []T, item func([]byte, *T) ([]byte, bool)) ([]byte, bool) {
	if list == nil {
		return append(dst, "null"...), true
	}
	dst = append(dst, '[')
	for i := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		var ok bool
		if dst, ok = item(dst, &list[i]); !ok {
			return dst, false
		}
	}
	return append(dst, ']'), true
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it: HTML characters as \u003c, \u003e and \u0026, control
// characters, invalid UTF-8 as \ufffd, U+2028 and U+2029 (encoding/json's
// appendString with escapeHTML).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendStrings appends a string list, null when nil.
func appendStrings[S ~string](dst []byte, list []S) []byte {
	if list == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range list {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, string(s))
	}
	return append(dst, ']')
}

// appendStringMap appends a string map with its keys sorted, null when
// nil.
func appendStringMap(dst []byte, m map[string]string) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, m[k])
	}
	return append(dst, '}')
}

// jsonObject writes the members of a JSON object: each member's name is
// written with its comma, so that a member left out (omitempty) leaves
// none behind.
type jsonObject struct {
	b     []byte
	first bool
}

func newObject(dst []byte) jsonObject { return jsonObject{b: append(dst, '{'), first: true} }

// name starts a member.
func (o *jsonObject) name(n string) {
	if !o.first {
		o.b = append(o.b, ',')
	}
	o.first = false
	o.b = append(o.b, '"')
	o.b = append(o.b, n...)
	o.b = append(o.b, '"', ':')
}

func (o *jsonObject) end() []byte { return append(o.b, '}') }

// str writes a string member; omitEmpty leaves an empty one out.
func (o *jsonObject) str(n, v string, omitEmpty bool) {
	if v == "" && omitEmpty {
		return
	}
	o.name(n)
	o.b = appendString(o.b, v)
}

// strPtr writes a *string member (of any string type); omitEmpty leaves
// a nil one out, otherwise it is null.
func strPtr[S ~string](o *jsonObject, n string, v *S, omitEmpty bool) {
	if v == nil {
		if !omitEmpty {
			o.name(n)
			o.b = append(o.b, "null"...)
		}
		return
	}
	o.name(n)
	o.b = appendString(o.b, string(*v))
}

// strs writes a string list member, left out when empty.
func strs[S ~string](o *jsonObject, n string, v []S) {
	if len(v) == 0 {
		return
	}
	o.name(n)
	o.b = appendStrings(o.b, v)
}

// integer writes an integer member; omitEmpty leaves a zero one out.
func integer[I int32 | int64](o *jsonObject, n string, v I, omitEmpty bool) {
	if v == 0 && omitEmpty {
		return
	}
	o.name(n)
	o.b = strconv.AppendInt(o.b, int64(v), 10)
}

// intPtr writes a pointer to an integer member, left out when nil.
func intPtr[I int32 | int64](o *jsonObject, n string, v *I) {
	if v != nil {
		o.name(n)
		o.b = strconv.AppendInt(o.b, int64(*v), 10)
	}
}

// boolean writes a bool member, left out when false.
func (o *jsonObject) boolean(n string, v bool) {
	if v {
		o.name(n)
		o.b = append(o.b, "true"...)
	}
}

// boolPtr writes a *bool member, left out when nil.
func (o *jsonObject) boolPtr(n string, v *bool) {
	if v != nil {
		o.name(n)
		o.b = strconv.AppendBool(o.b, *v)
	}
}

// quantity writes a Quantity member as its MarshalJSON does.
func (o *jsonObject) quantity(n string, q *resource.Quantity) {
	o.name(n)
	o.b = appendQuantity(o.b, q)
}

func appendQuantity(dst []byte, q *resource.Quantity) []byte {
	b, _ := q.MarshalJSON() // a Quantity always marshals
	return append(dst, b...)
}

// intOrString writes an IntOrString member as its MarshalJSON does.
func (o *jsonObject) intOrString(n string, v *intstr.IntOrString) bool {
	b, err := v.MarshalJSON()
	if err != nil {
		return false
	}
	o.name(n)
	o.b = append(o.b, b...)
	return true
}

// resourceList writes a ResourceList member with its names sorted, left
// out when empty.
func (o *jsonObject) resourceList(n string, l corev1.ResourceList) {
	if len(l) == 0 {
		return
	}
	o.name(n)
	names := make([]corev1.ResourceName, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	slices.Sort(names)
	o.b = append(o.b, '{')
	for i, k := range names {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendString(o.b, string(k))
		o.b = append(o.b, ':')
		q := l[k]
		o.b = appendQuantity(o.b, &q)
	}
	o.b = append(o.b, '}')
}

// list writes a list member with item, left out when empty.
func list[T any](o *jsonObject, n string, v []T, item func([]byte, *T) ([]byte, bool)) bool {
	if len(v) == 0 {
		return true
	}
	o.name(n)
	var ok bool
	o.b, ok = appendList(o.b, v, item)
	return ok
}

// pointee writes a pointer member with item, left out when nil.
func pointee[T any](o *jsonObject, n string, v *T, item func([]byte, *T) ([]byte, bool)) bool {
	if v == nil {
		return true
	}
	o.name(n)
	var ok bool
	o.b, ok = item(o.b, v)
	return ok
}

// containerUnwritten reports whether a container sets a field
// appendContainer does not write.
func containerUnwritten(c *corev1.Container) bool {
	return c.EnvFrom != nil || c.ResizePolicy != nil || c.RestartPolicyRules != nil ||
		c.VolumeDevices != nil || c.Lifecycle != nil
}

func appendContainer(dst []byte, c *corev1.Container) ([]byte, bool) {
	if containerUnwritten(c) {
		return dst, false
	}
	o := newObject(dst)
	o.str("name", c.Name, false)
	o.str("image", c.Image, true)
	strs(&o, "command", c.Command)
	strs(&o, "args", c.Args)
	o.str("workingDir", c.WorkingDir, true)
	ok := list(&o, "ports", c.Ports, appendContainerPort) &&
		list(&o, "env", c.Env, appendEnvVar)
	if !ok {
		return o.b, false
	}
	o.name("resources")
	if o.b, ok = appendResources(o.b, &c.Resources); !ok {
		return o.b, false
	}
	strPtr(&o, "restartPolicy", c.RestartPolicy, true)
	ok = list(&o, "volumeMounts", c.VolumeMounts, appendVolumeMount) &&
		pointee(&o, "livenessProbe", c.LivenessProbe, appendProbe) &&
		pointee(&o, "readinessProbe", c.ReadinessProbe, appendProbe) &&
		pointee(&o, "startupProbe", c.StartupProbe, appendProbe)
	if !ok {
		return o.b, false
	}
	o.str("terminationMessagePath", c.TerminationMessagePath, true)
	o.str("terminationMessagePolicy", string(c.TerminationMessagePolicy), true)
	o.str("imagePullPolicy", string(c.ImagePullPolicy), true)
	if !pointee(&o, "securityContext", c.SecurityContext, appendSecurityContext) {
		return o.b, false
	}
	o.boolean("stdin", c.Stdin)
	o.boolean("stdinOnce", c.StdinOnce)
	o.boolean("tty", c.TTY)
	return o.end(), true
}

func appendContainerPort(dst []byte, p *corev1.ContainerPort) ([]byte, bool) {
	o := newObject(dst)
	o.str("name", p.Name, true)
	integer(&o, "hostPort", p.HostPort, true)
	integer(&o, "containerPort", p.ContainerPort, false)
	o.str("protocol", string(p.Protocol), true)
	o.str("hostIP", p.HostIP, true)
	return o.end(), true
}

func appendEnvVar(dst []byte, e *corev1.EnvVar) ([]byte, bool) {
	o := newObject(dst)
	o.str("name", e.Name, false)
	o.str("value", e.Value, true)
	if !pointee(&o, "valueFrom", e.ValueFrom, appendEnvVarSource) {
		return o.b, false
	}
	return o.end(), true
}

func appendEnvVarSource(dst []byte, s *corev1.EnvVarSource) ([]byte, bool) {
	if s.FileKeyRef != nil {
		return dst, false
	}
	o := newObject(dst)
	if f := s.FieldRef; f != nil {
		o.name("fieldRef")
		fo := newObject(o.b)
		fo.str("apiVersion", f.APIVersion, true)
		fo.str("fieldPath", f.FieldPath, false)
		o.b = fo.end()
	}
	if r := s.ResourceFieldRef; r != nil {
		o.name("resourceFieldRef")
		ro := newObject(o.b)
		ro.str("containerName", r.ContainerName, true)
		ro.str("resource", r.Resource, false)
		ro.quantity("divisor", &r.Divisor)
		o.b = ro.end()
	}
	if r := s.ConfigMapKeyRef; r != nil {
		o.name("configMapKeyRef")
		o.b = appendKeySelector(o.b, r.Name, r.Key, r.Optional)
	}
	if r := s.SecretKeyRef; r != nil {
		o.name("secretKeyRef")
		o.b = appendKeySelector(o.b, r.Name, r.Key, r.Optional)
	}
	return o.end(), true
}

// appendKeySelector writes a ConfigMapKeySelector or SecretKeySelector.
func appendKeySelector(dst []byte, name, key string, optional *bool) []byte {
	o := newObject(dst)
	o.str("name", name, true)
	o.str("key", key, false)
	o.boolPtr("optional", optional)
	return o.end()
}

func appendResources(dst []byte, r *corev1.ResourceRequirements) ([]byte, bool) {
	o := newObject(dst)
	o.resourceList("limits", r.Limits)
	o.resourceList("requests", r.Requests)
	list(&o, "claims", r.Claims, func(dst []byte, c *corev1.ResourceClaim) ([]byte, bool) {
		co := newObject(dst)
		co.str("name", c.Name, false)
		co.str("request", c.Request, true)
		return co.end(), true
	})
	return o.end(), true
}

func appendVolumeMount(dst []byte, m *corev1.VolumeMount) ([]byte, bool) {
	o := newObject(dst)
	o.str("name", m.Name, false)
	o.boolean("readOnly", m.ReadOnly)
	strPtr(&o, "recursiveReadOnly", m.RecursiveReadOnly, true)
	o.str("mountPath", m.MountPath, false)
	o.str("subPath", m.SubPath, true)
	strPtr(&o, "mountPropagation", m.MountPropagation, true)
	o.str("subPathExpr", m.SubPathExpr, true)
	strs(&o, "bindMountOptions", m.BindMountOptions)
	return o.end(), true
}

func appendProbe(dst []byte, p *corev1.Probe) ([]byte, bool) {
	o := newObject(dst)
	if e := p.Exec; e != nil {
		o.name("exec")
		eo := newObject(o.b)
		strs(&eo, "command", e.Command)
		o.b = eo.end()
	}
	if h := p.HTTPGet; h != nil {
		o.name("httpGet")
		ho := newObject(o.b)
		ho.str("path", h.Path, true)
		if !ho.intOrString("port", &h.Port) {
			return ho.b, false
		}
		ho.str("host", h.Host, true)
		ho.str("scheme", string(h.Scheme), true)
		list(&ho, "httpHeaders", h.HTTPHeaders, func(dst []byte, hd *corev1.HTTPHeader) ([]byte, bool) {
			hdo := newObject(dst)
			hdo.str("name", hd.Name, false)
			hdo.str("value", hd.Value, false)
			return hdo.end(), true
		})
		strPtr(&ho, "protocol", h.Protocol, true)
		o.b = ho.end()
	}
	if s := p.TCPSocket; s != nil {
		o.name("tcpSocket")
		so := newObject(o.b)
		if !so.intOrString("port", &s.Port) {
			return so.b, false
		}
		so.str("host", s.Host, true)
		o.b = so.end()
	}
	if g := p.GRPC; g != nil {
		o.name("grpc")
		gobj := newObject(o.b)
		integer(&gobj, "port", g.Port, false)
		strPtr(&gobj, "service", g.Service, false)
		strPtr(&gobj, "mode", g.Mode, true)
		o.b = gobj.end()
	}
	integer(&o, "initialDelaySeconds", p.InitialDelaySeconds, true)
	integer(&o, "timeoutSeconds", p.TimeoutSeconds, true)
	integer(&o, "periodSeconds", p.PeriodSeconds, true)
	integer(&o, "successThreshold", p.SuccessThreshold, true)
	integer(&o, "failureThreshold", p.FailureThreshold, true)
	intPtr(&o, "terminationGracePeriodSeconds", p.TerminationGracePeriodSeconds)
	return o.end(), true
}

func appendSecurityContext(dst []byte, s *corev1.SecurityContext) ([]byte, bool) {
	if s.SELinuxOptions != nil || s.WindowsOptions != nil || s.AppArmorProfile != nil {
		return dst, false
	}
	o := newObject(dst)
	if c := s.Capabilities; c != nil {
		o.name("capabilities")
		co := newObject(o.b)
		strs(&co, "add", c.Add)
		strs(&co, "drop", c.Drop)
		o.b = co.end()
	}
	o.boolPtr("privileged", s.Privileged)
	intPtr(&o, "runAsUser", s.RunAsUser)
	intPtr(&o, "runAsGroup", s.RunAsGroup)
	o.boolPtr("runAsNonRoot", s.RunAsNonRoot)
	o.boolPtr("readOnlyRootFilesystem", s.ReadOnlyRootFilesystem)
	o.boolPtr("allowPrivilegeEscalation", s.AllowPrivilegeEscalation)
	strPtr(&o, "procMount", s.ProcMount, true)
	if p := s.SeccompProfile; p != nil {
		o.name("seccompProfile")
		po := newObject(o.b)
		po.str("type", string(p.Type), false)
		strPtr(&po, "localhostProfile", p.LocalhostProfile, true)
		o.b = po.end()
	}
	return o.end(), true
}

// writtenVolumeSources are the volume sources appendVolume writes.
func writtenVolumeSources(s corev1.VolumeSource) corev1.VolumeSource {
	return corev1.VolumeSource{HostPath: s.HostPath, EmptyDir: s.EmptyDir, PersistentVolumeClaim: s.PersistentVolumeClaim, Image: s.Image}
}

func appendVolume(dst []byte, v *corev1.Volume) ([]byte, bool) {
	if writtenVolumeSources(v.VolumeSource) != v.VolumeSource {
		return dst, false
	}
	o := newObject(dst)
	o.str("name", v.Name, false)
	if h := v.HostPath; h != nil {
		o.name("hostPath")
		ho := newObject(o.b)
		ho.str("path", h.Path, false)
		strPtr(&ho, "type", h.Type, true)
		o.b = ho.end()
	}
	if e := v.EmptyDir; e != nil {
		o.name("emptyDir")
		eo := newObject(o.b)
		eo.str("medium", string(e.Medium), true)
		if e.SizeLimit != nil {
			eo.quantity("sizeLimit", e.SizeLimit)
		}
		intPtr(&eo, "mode", e.Mode)
		o.b = eo.end()
	}
	if p := v.PersistentVolumeClaim; p != nil {
		o.name("persistentVolumeClaim")
		po := newObject(o.b)
		po.str("claimName", p.ClaimName, false)
		po.boolean("readOnly", p.ReadOnly)
		o.b = po.end()
	}
	if i := v.Image; i != nil {
		o.name("image")
		io := newObject(o.b)
		io.str("reference", i.Reference, true)
		io.str("pullPolicy", string(i.PullPolicy), true)
		o.b = io.end()
	}
	return o.end(), true
}

func appendToleration(dst []byte, t *corev1.Toleration) ([]byte, bool) {
	o := newObject(dst)
	o.str("key", t.Key, true)
	o.str("operator", string(t.Operator), true)
	o.str("value", t.Value, true)
	o.str("effect", string(t.Effect), true)
	intPtr(&o, "tolerationSeconds", t.TolerationSeconds)
	return o.end(), true
}

func appendAffinity(dst []byte, a *corev1.Affinity) ([]byte, bool) {
	if a == nil {
		return append(dst, "null"...), true
	}
	if a.PodAffinity != nil || a.PodAntiAffinity != nil {
		return dst, false
	}
	o := newObject(dst)
	if na := a.NodeAffinity; na != nil {
		o.name("nodeAffinity")
		no := newObject(o.b)
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			no.name("requiredDuringSchedulingIgnoredDuringExecution")
			ro := newObject(no.b)
			ro.name("nodeSelectorTerms")
			ro.b, _ = appendList(ro.b, r.NodeSelectorTerms, appendNodeSelectorTerm)
			no.b = ro.end()
		}
		list(&no, "preferredDuringSchedulingIgnoredDuringExecution", na.PreferredDuringSchedulingIgnoredDuringExecution,
			func(dst []byte, p *corev1.PreferredSchedulingTerm) ([]byte, bool) {
				po := newObject(dst)
				integer(&po, "weight", p.Weight, false)
				po.name("preference")
				po.b, _ = appendNodeSelectorTerm(po.b, &p.Preference)
				return po.end(), true
			})
		o.b = no.end()
	}
	return o.end(), true
}

func appendNodeSelectorTerm(dst []byte, t *corev1.NodeSelectorTerm) ([]byte, bool) {
	o := newObject(dst)
	list(&o, "matchExpressions", t.MatchExpressions, appendNodeSelectorRequirement)
	list(&o, "matchFields", t.MatchFields, appendNodeSelectorRequirement)
	return o.end(), true
}

func appendNodeSelectorRequirement(dst []byte, r *corev1.NodeSelectorRequirement) ([]byte, bool) {
	o := newObject(dst)
	o.str("key", r.Key, false)
	o.str("operator", string(r.Operator), false)
	strs(&o, "values", r.Values)
	return o.end(), true
}

func appendPodResourceClaim(dst []byte, c *corev1.PodResourceClaim) ([]byte, bool) {
	o := newObject(dst)
	o.str("name", c.Name, false)
	strPtr(&o, "resourceClaimName", c.ResourceClaimName, true)
	strPtr(&o, "resourceClaimTemplateName", c.ResourceClaimTemplateName, true)
	return o.end(), true
}
