package workload

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// contractKeys are the top-level keys of input.workload in the contract.
var contractKeys = []string{
	"kind", "apiVersion", "name", "namespace", "operation",
	"labels", "annotations", "podLabels", "podAnnotations",
	"userInfo", "namespaceLabels", "owner", "team", "injected", "servingContainer",
	"hostNetwork", "hostPID", "hostIPC", "containers", "initContainers", "ephemeralContainers",
	"gpu", "model", "engine", "serving",
}

// viaJSON is v's value the slow way: its JSON, decoded as OPA decodes
// input, then converted.
func viaJSON(tb testing.TB, v *View) ast.Value {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var x any
	if err := util.UnmarshalJSON(b, &x); err != nil {
		tb.Fatal(err)
	}
	val, err := ast.InterfaceToValue(x)
	if err != nil {
		tb.Fatal(err)
	}
	return val
}

// fill sets every field under v, recursively: pointers allocated, slices
// and maps of two, strings and numbers derived from the field path. A
// field Kubernetes adds later is filled too, so a converter that misses it
// fails.
func fill(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for _, k := range []string{"a", "b"} {
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), reflect.ValueOf(path+"/"+k).Convert(v.Type().Elem()))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), path+"[0]")
		fill(v.Index(1), path+"[1]")
	case reflect.String:
		v.SetString(path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int32, reflect.Int64:
		v.SetInt(int64(1000 + len(path)))
	default:
		panic("fill: unhandled kind " + v.Kind().String() + " at " + path)
	}
}

// withContainer is a source whose only container has the security context.
func withContainer(sc *corev1.SecurityContext) Source {
	c := container("app", "1", "")
	c.SecurityContext = sc
	return Source{GPU: nvidia, PodSpec: &corev1.PodSpec{Containers: []corev1.Container{c}}}
}

func TestValueMatchesJSON(t *testing.T) {
	full := &corev1.SecurityContext{}
	fill(reflect.ValueOf(full).Elem(), "securityContext")
	large := container("big", "100000", "")
	large.Ports = []corev1.ContainerPort{{ContainerPort: 65535}, {ContainerPort: 0}}
	large.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1.5Ti")}

	tests := map[string]func(t *testing.T) *View{
		"empty source":                 func(*testing.T) *View { return Build(Source{}) },
		"zero view":                    func(*testing.T) *View { return &View{} },
		"zero container":               func(*testing.T) *View { return &View{Containers: []Container{{}}, Model: &Model{}} },
		"vllm deployment":              func(t *testing.T) *View { return Build(vllmDeployment(t)) },
		"every security context field": func(*testing.T) *View { return Build(withContainer(full)) },
		"empty nested security context": func(*testing.T) *View {
			return Build(withContainer(&corev1.SecurityContext{
				Capabilities:    &corev1.Capabilities{Add: []corev1.Capability{}},
				SELinuxOptions:  &corev1.SELinuxOptions{},
				WindowsOptions:  &corev1.WindowsSecurityContextOptions{RunAsUserName: ptr.To("")},
				SeccompProfile:  &corev1.SeccompProfile{},
				AppArmorProfile: &corev1.AppArmorProfile{LocalhostProfile: ptr.To("")},
				RunAsUser:       ptr.To[int64](0),
			}))
		},
		"large numbers": func(*testing.T) *View {
			s := withContainer(&corev1.SecurityContext{RunAsUser: ptr.To[int64](1 << 40), RunAsGroup: ptr.To[int64](-1)})
			s.PodSpec.InitContainers = []corev1.Container{large}
			s.Settings.GPU.MinMemoryMiB = 1 << 50
			return Build(s)
		},
		"escaping and unicode": func(*testing.T) *View {
			meta := &metav1.ObjectMeta{Name: "モデル", Labels: map[string]string{`a"b`: "c\\d", "": "\u2028"},
				Annotations: map[string]string{"html": "<script>&</script>"}}
			return Build(Source{Object: meta, UserInfo: alice})
		},
		"affinity products": func(*testing.T) *View {
			return Build(Source{GPU: nvidia, PodSpec: &corev1.PodSpec{Affinity: requiredAffinity(
				term(req(productLabel, corev1.NodeSelectorOpIn, "b", "a")), term(req(productLabel, corev1.NodeSelectorOpIn, "c")))}})
		},
	}
	for _, uri := range []string{"s3://bucket/p", "gs://bucket/p", "hf://org/repo@main", "pvc://claim/sub",
		"https://example.com/m.gguf", "oci://ghcr.io/org/model@sha256:" + commit + commit[:24]} {
		tests["model "+uri] = func(t *testing.T) *View {
			return Build(Source{Settings: annotations.Settings{Model: parseModel(t, uri)}})
		}
	}
	for _, kind := range builders.Kinds {
		tests["kind "+kind] = func(*testing.T) *View {
			return Build(sourceOf(builders.New(kind, builders.Options{Name: "x", Namespace: "y",
				Labels: map[string]string{"l": "1"}, TemplateAnnotations: map[string]string{"a": "2"}})))
		}
	}

	for name, build := range tests {
		t.Run(name, func(t *testing.T) {
			v := build(t)
			got, want := v.Value(), viaJSON(t, v)
			if ast.Compare(want, got) == 0 {
				return
			}
			wantJSON, err := ast.JSON(want)
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, err := ast.JSON(got)
			if err != nil {
				t.Fatal(err)
			}
			t.Errorf("Value() differs from the JSON round trip (-want +got):\n%s", cmp.Diff(wantJSON, gotJSON))
		})
	}
}

// TestValueOf: the partial value has exactly the keys asked for, each
// with the whole value's value.
func TestValueOf(t *testing.T) {
	v := Build(sourceOf(builders.New("Deployment", builders.Options{Name: "x", Namespace: "y",
		Labels: map[string]string{"l": "1"}, TemplateAnnotations: map[string]string{"a": "2"}})))
	whole := v.Value().(ast.Object)
	for _, keys := range [][]string{{}, {"kind"}, {"labels", "gpu", "containers"}, {"model", "nope"}} {
		got := v.ValueOf(func(k string) bool { return slices.Contains(keys, k) }).(ast.Object)
		want := ast.NewObject()
		for _, k := range keys {
			if val := whole.Get(ast.StringTerm(k)); val != nil {
				want.Insert(ast.StringTerm(k), val)
			}
		}
		if ast.Compare(want, got) != 0 {
			t.Errorf("ValueOf(%v) = %v, want %v", keys, got, want)
		}
	}
}

// TestFillSetsEveryField guards the test above: the filled security context
// has every field in its JSON.
func TestFillSetsEveryField(t *testing.T) {
	var sc corev1.SecurityContext
	fill(reflect.ValueOf(&sc).Elem(), "sc")
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got, want := len(m), reflect.TypeFor[corev1.SecurityContext]().NumField(); got != want {
		t.Errorf("filled security context has %d JSON keys, want %d (one per field): %s", got, want, b)
	}
}

func TestEmptyViewKeys(t *testing.T) {
	for name, v := range map[string]*View{"built from nothing": Build(Source{}), "zero": {}} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(slices.Sorted(slices.Values(contractKeys)), slices.Sorted(maps.Keys(m))); diff != "" {
				t.Errorf("top-level keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmptyViewValues(t *testing.T) {
	want := map[string]any{
		"kind": "", "apiVersion": "", "name": "", "namespace": "", "operation": "",
		"labels": map[string]any{}, "annotations": map[string]any{},
		"podLabels": map[string]any{}, "podAnnotations": map[string]any{},
		"userInfo":        map[string]any{"username": "", "groups": []any{}, "uid": ""},
		"namespaceLabels": map[string]any{}, "owner": "", "team": "", "injected": false,
		"servingContainer": "", "hostNetwork": false, "hostPID": false, "hostIPC": false,
		"containers": []any{}, "initContainers": []any{}, "ephemeralContainers": []any{},
		"gpu": map[string]any{"resource": "", "count": float64(0), "products": []any{}, "memoryMiB": float64(0), "claims": []any{},
			"devices": []any{}, "unresolvedClaims": []any{}},
		"model": nil, "engine": "", "serving": false,
	}
	b, err := json.Marshal(Build(Source{}))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON of Build(Source{}) (-want +got):\n%s", diff)
	}
}

func TestEmptyContainerValues(t *testing.T) {
	want := map[string]any{
		"name": "", "image": "", "gpus": float64(0), "claims": []any{},
		"resources":       map[string]any{"limits": map[string]any{}, "requests": map[string]any{}},
		"securityContext": map[string]any{}, "privileged": false, "ports": []any{},
		"readinessProbe": false, "startupProbe": false, "livenessProbe": false,
	}
	v := Build(Source{PodSpec: &corev1.PodSpec{Containers: []corev1.Container{{}}}})
	b, err := json.Marshal(v.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON of an empty container (-want +got):\n%s", diff)
	}
}

func BenchmarkBuild(b *testing.B) {
	s := vllmDeployment(b)
	b.ReportAllocs()
	for b.Loop() {
		_ = Build(s)
	}
}

func BenchmarkValue(b *testing.B) {
	v := Build(vllmDeployment(b))
	b.ReportAllocs()
	for b.Loop() {
		_ = v.Value()
	}
}

func BenchmarkValueViaJSON(b *testing.B) {
	v := Build(vllmDeployment(b))
	b.ReportAllocs()
	for b.Loop() {
		_ = viaJSON(b, v)
	}
}
