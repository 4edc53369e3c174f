package webhook

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	gomodulespatch "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// TestMain checks every patch any test of this package encodes (the
// goldens, the handler's tests, the fuzzers) against encoding/json's
// encoding of the same operations, byte for byte; not when benchmarks
// run, which it would slow.
func TestMain(m *testing.M) {
	flag.Parse()
	if b := flag.Lookup("test.bench"); b == nil || b.Value.String() == "" {
		verifyPatchEncoding = checkPatchEncoding
	}
	os.Exit(m.Run())
}

// checkPatchEncoding panics unless patch is encodePatchGeneral(ops).
func checkPatchEncoding(ops []gomodulespatch.Operation, patch []byte) {
	want, err := encodePatchGeneral(ops)
	if err != nil {
		panic(fmt.Sprintf("encoding/json refuses a patch appendValue wrote: %v\n%s", err, patch))
	}
	if !bytes.Equal(patch, want) {
		panic(fmt.Sprintf("the patch differs from encoding/json's:\n got %s\nwant %s", patch, want))
	}
}

// encodePatchGeneral is encodePatch with encoding/json for every value:
// the general path appendValue must equal.
func encodePatchGeneral(ops []gomodulespatch.Operation) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	buf.WriteByte('[')
	for i, op := range ops {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"op":`)
		buf.Write(appendJSONString(nil, op.Operation))
		buf.WriteString(`,"path":`)
		buf.Write(appendJSONString(nil, op.Path))
		if op.Operation != "remove" {
			buf.WriteString(`,"value":`)
			if err := enc.Encode(op.Value); err != nil {
				return nil, err
			}
			buf.Truncate(buf.Len() - 1)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// patchValueFiller fills values at random: each pointer, slice and map
// set or not, strings of any byte (quotes, HTML characters, control
// characters, invalid UTF-8), quantities of every format, ports as numbers
// and names.
func patchValueFiller(seed int64) *randfill.Filler {
	odd := []string{"", "a", "<b>&", `q"uote\`, "tab\t\x01", "é", "\u2028", "\xff", "nvidia.com/gpu", "modelgate.io/owner"}
	return randfill.New().NilChance(0.4).NumElements(0, 3).MaxDepth(8).
		RandSource(rand.NewSource(seed)).
		Funcs(
			func(s *string, c randfill.Continue) {
				if c.Bool() {
					*s = odd[c.Intn(len(odd))]
				} else {
					*s = c.String(6)
				}
			},
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewMilliQuantity(c.Int63n(1<<40), []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}[c.Intn(3)])
			},
			func(l *corev1.ResourceList, c randfill.Continue) {
				*l = corev1.ResourceList{}
				for _, name := range []corev1.ResourceName{"nvidia.com/gpu", "cpu", "memory", "b<&>", corev1.ResourceName(c.String(8))} {
					if c.Bool() {
						(*l)[name] = *resource.NewQuantity(c.Int63n(1<<34), resource.BinarySI)
					}
				}
			},
			func(v *intstr.IntOrString, c randfill.Continue) {
				if c.Bool() {
					*v = intstr.FromInt32(c.Int31())
				} else {
					*v = intstr.FromString(odd[c.Intn(len(odd))])
				}
			},
		)
}

// clearUnwritten clears, in a container, the fields appendValue refuses,
// so that the container goes through appendValue.
func clearUnwritten(c *corev1.Container) {
	c.EnvFrom, c.ResizePolicy, c.RestartPolicyRules, c.VolumeDevices, c.Lifecycle = nil, nil, nil, nil, nil
	for i := range c.Env {
		if c.Env[i].ValueFrom != nil {
			c.Env[i].ValueFrom.FileKeyRef = nil
		}
	}
	if s := c.SecurityContext; s != nil {
		s.SELinuxOptions, s.WindowsOptions, s.AppArmorProfile = nil, nil, nil
	}
}

// TestPatchValuesAsEncodingJSON: appendValue writes what encoding/json
// writes for random values of every type it takes, and takes each of
// them once the fields it refuses are cleared.
func TestPatchValuesAsEncodingJSON(t *testing.T) {
	f := patchValueFiller(1)
	cases := map[string]struct {
		fill func() (raw, cleared any)
	}{
		"string": {func() (any, any) { var s string; f.Fill(&s); return s, s }},
		"labels": {func() (any, any) { var m map[string]string; f.Fill(&m); return m, m }},
		"containers": {func() (any, any) {
			var l []corev1.Container
			f.Fill(&l)
			c := make([]corev1.Container, len(l))
			for i := range l {
				c[i] = *l[i].DeepCopy()
				clearUnwritten(&c[i])
			}
			if l == nil {
				c = nil
			}
			return l, c
		}},
		"container": {func() (any, any) {
			var c corev1.Container
			f.Fill(&c)
			d := *c.DeepCopy()
			clearUnwritten(&d)
			return c, d
		}},
		"volumes": {func() (any, any) {
			var l []corev1.Volume
			f.Fill(&l)
			c := slices.Clone(l)
			for i := range c {
				c[i].VolumeSource = writtenVolumeSources(c[i].VolumeSource)
			}
			return l, c
		}},
		"volume": {func() (any, any) {
			var v corev1.Volume
			f.Fill(&v)
			c := v
			c.VolumeSource = writtenVolumeSources(v.VolumeSource)
			return v, c
		}},
		"tolerations": {func() (any, any) { var l []corev1.Toleration; f.Fill(&l); return l, l }},
		"toleration":  {func() (any, any) { var v corev1.Toleration; f.Fill(&v); return v, v }},
		"affinity": {func() (any, any) {
			var a *corev1.Affinity
			f.Fill(&a)
			if a == nil {
				return a, a
			}
			c := *a
			c.PodAffinity, c.PodAntiAffinity = nil, nil
			return a, &c
		}},
		"resources": {func() (any, any) { var r corev1.ResourceRequirements; f.Fill(&r); return r, r }},
		"env": {func() (any, any) {
			var l []corev1.EnvVar
			f.Fill(&l)
			c := corev1.Container{Env: l}
			c = *c.DeepCopy()
			clearUnwritten(&c)
			return l, c.Env
		}},
		"envVar": {func() (any, any) {
			var e corev1.EnvVar
			f.Fill(&e)
			c := corev1.Container{Env: []corev1.EnvVar{*e.DeepCopy()}}
			clearUnwritten(&c)
			return e, c.Env[0]
		}},
		"volumeMounts":   {func() (any, any) { var l []corev1.VolumeMount; f.Fill(&l); return l, l }},
		"ports":          {func() (any, any) { var l []corev1.ContainerPort; f.Fill(&l); return l, l }},
		"probe":          {func() (any, any) { var p *corev1.Probe; f.Fill(&p); return p, p }},
		"resourceClaims": {func() (any, any) { var l []corev1.PodResourceClaim; f.Fill(&l); return l, l }},
		"resourceClaim":  {func() (any, any) { var c corev1.PodResourceClaim; f.Fill(&c); return c, c }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			taken := 0
			for range 400 {
				raw, cleared := tc.fill()
				if sameAsEncodingJSON(t, raw) {
					taken++
				}
				if !sameAsEncodingJSON(t, cleared) {
					t.Fatalf("appendValue refuses %#v, whose refused fields are cleared", cleared)
				}
			}
			t.Logf("%d of 400 random values taken as they were", taken)
		})
	}
}

// sameAsEncodingJSON fails unless appendValue, when it takes v, writes
// what encoding/json writes; it reports whether appendValue took v.
func sameAsEncodingJSON(t *testing.T, v any) bool {
	t.Helper()
	prefix := []byte("prefix")
	got, ok := appendValue(prefix, v)
	if !ok {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("refusing %#v, appendValue changed the buffer: %q", v, got)
		}
		return false
	}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding/json refuses %#v, which appendValue wrote: %v", v, err)
	}
	if !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("appendValue(%#v):\n got %s\nwant %s", v, got[len(prefix):], want)
	}
	return true
}

// patchValueFields are, for every struct type appendValue writes, its
// fields: those written, and those whose being set makes it refuse the
// value ("refused:").
var patchValueFields = map[reflect.Type]string{
	reflect.TypeFor[corev1.Container](): "Name Image Command Args WorkingDir Ports Env Resources RestartPolicy VolumeMounts " +
		"LivenessProbe ReadinessProbe StartupProbe TerminationMessagePath TerminationMessagePolicy ImagePullPolicy SecurityContext " +
		"Stdin StdinOnce TTY refused: EnvFrom ResizePolicy RestartPolicyRules VolumeDevices Lifecycle",
	reflect.TypeFor[corev1.ContainerPort]():                     "Name HostPort ContainerPort Protocol HostIP",
	reflect.TypeFor[corev1.EnvVar]():                            "Name Value ValueFrom",
	reflect.TypeFor[corev1.EnvVarSource]():                      "FieldRef ResourceFieldRef ConfigMapKeyRef SecretKeyRef refused: FileKeyRef",
	reflect.TypeFor[corev1.ObjectFieldSelector]():               "APIVersion FieldPath",
	reflect.TypeFor[corev1.ResourceFieldSelector]():             "ContainerName Resource Divisor",
	reflect.TypeFor[corev1.ConfigMapKeySelector]():              "LocalObjectReference Key Optional",
	reflect.TypeFor[corev1.SecretKeySelector]():                 "LocalObjectReference Key Optional",
	reflect.TypeFor[corev1.LocalObjectReference]():              "Name",
	reflect.TypeFor[corev1.ResourceRequirements]():              "Limits Requests Claims",
	reflect.TypeFor[corev1.ResourceClaim]():                     "Name Request",
	reflect.TypeFor[corev1.VolumeMount]():                       "Name ReadOnly RecursiveReadOnly MountPath SubPath MountPropagation SubPathExpr BindMountOptions",
	reflect.TypeFor[corev1.Probe]():                             "ProbeHandler InitialDelaySeconds TimeoutSeconds PeriodSeconds SuccessThreshold FailureThreshold TerminationGracePeriodSeconds",
	reflect.TypeFor[corev1.ProbeHandler]():                      "Exec HTTPGet TCPSocket GRPC",
	reflect.TypeFor[corev1.ExecAction]():                        "Command",
	reflect.TypeFor[corev1.HTTPGetAction]():                     "Path Port Host Scheme HTTPHeaders Protocol",
	reflect.TypeFor[corev1.HTTPHeader]():                        "Name Value",
	reflect.TypeFor[corev1.TCPSocketAction]():                   "Port Host",
	reflect.TypeFor[corev1.GRPCAction]():                        "Port Service Mode",
	reflect.TypeFor[corev1.SecurityContext]():                   "Capabilities Privileged RunAsUser RunAsGroup RunAsNonRoot ReadOnlyRootFilesystem AllowPrivilegeEscalation ProcMount SeccompProfile refused: SELinuxOptions WindowsOptions AppArmorProfile",
	reflect.TypeFor[corev1.Capabilities]():                      "Add Drop",
	reflect.TypeFor[corev1.SeccompProfile]():                    "Type LocalhostProfile",
	reflect.TypeFor[corev1.Volume]():                            "Name VolumeSource",
	reflect.TypeFor[corev1.EmptyDirVolumeSource]():              "Medium SizeLimit Mode",
	reflect.TypeFor[corev1.HostPathVolumeSource]():              "Path Type",
	reflect.TypeFor[corev1.PersistentVolumeClaimVolumeSource](): "ClaimName ReadOnly",
	reflect.TypeFor[corev1.ImageVolumeSource]():                 "Reference PullPolicy",
	reflect.TypeFor[corev1.Toleration]():                        "Key Operator Value Effect TolerationSeconds",
	reflect.TypeFor[corev1.Affinity]():                          "NodeAffinity refused: PodAffinity PodAntiAffinity",
	reflect.TypeFor[corev1.NodeAffinity]():                      "RequiredDuringSchedulingIgnoredDuringExecution PreferredDuringSchedulingIgnoredDuringExecution",
	reflect.TypeFor[corev1.NodeSelector]():                      "NodeSelectorTerms",
	reflect.TypeFor[corev1.NodeSelectorTerm]():                  "MatchExpressions MatchFields",
	reflect.TypeFor[corev1.NodeSelectorRequirement]():           "Key Operator Values",
	reflect.TypeFor[corev1.PreferredSchedulingTerm]():           "Weight Preference",
	reflect.TypeFor[corev1.PodResourceClaim]():                  "Name ResourceClaimName ResourceClaimTemplateName",
}

// TestPatchValueFieldsKnown fails when a type appendValue writes gains a
// field (a newer k8s.io/api) that it neither writes nor refuses: it would
// leave the field out of the patch. VolumeSource's other members are
// refused as a whole (writtenVolumeSources).
func TestPatchValueFieldsKnown(t *testing.T) {
	for typ, fields := range patchValueFields {
		checkFieldsKnown(t, typ, strings.Replace(fields, "refused:", "", 1), "appendValue")
	}
}

// checkFieldsKnown fails when typ's fields are not exactly the
// space-separated names in fields, which writer knows.
func checkFieldsKnown(t *testing.T, typ reflect.Type, fields, writer string) {
	t.Helper()
	want := strings.Fields(fields)
	var got []string
	for f := range typ.Fields() {
		got = append(got, f.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("%s has fields %v; %s knows %v", typ, got, writer, want)
	}
}

// FuzzPatchValues: appendValue writes what encoding/json writes for
// containers, volumes and affinities filled from the fuzzer's seed.
func FuzzPatchValues(f *testing.F) {
	for _, seed := range []int64{0, 1, 2, 42} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		fill := patchValueFiller(seed)
		var c corev1.Container
		fill.Fill(&c)
		clearUnwritten(&c)
		var v corev1.Volume
		fill.Fill(&v)
		v.VolumeSource = writtenVolumeSources(v.VolumeSource)
		var a corev1.Affinity
		fill.Fill(&a)
		for _, value := range []any{c, []corev1.Container{c}, v, &a, c.Env, c.Resources, c.ReadinessProbe} {
			sameAsEncodingJSON(t, value)
		}
	})
}

// TestAppendStringAsEncodingJSON: every string of up to two pieces, each
// an ASCII byte or a UTF-8 sequence (valid, invalid, truncated, U+2028),
// is escaped as encoding/json escapes it.
func TestAppendStringAsEncodingJSON(t *testing.T) {
	var pieces []string
	for b := range 0x80 {
		pieces = append(pieces, string(rune(b)))
	}
	pieces = append(pieces, "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "\xed\xa0\x80", "𝄞", "\ufffd")
	for _, a := range append(pieces, "") {
		for _, b := range pieces {
			s := a + b
			want, _ := json.Marshal(s)
			if got := appendString(nil, s); !bytes.Equal(got, want) {
				t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
			}
		}
	}
}
