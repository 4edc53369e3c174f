package decode

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestViewKeyFollowsTheViewTypes: AppendViewKey's trees name exactly the
// fields the view types decode, level by level, so that a field added to
// viewtypes.go for the view is keyed too.
func TestViewKeyFollowsTheViewTypes(t *testing.T) {
	roots := map[string]reflect.Type{
		"Pod": reflect.TypeFor[podView](), "Deployment": reflect.TypeFor[templatedView](),
		"StatefulSet": reflect.TypeFor[templatedView](), "Job": reflect.TypeFor[templatedView](),
		"CronJob": reflect.TypeFor[cronJobView](),
	}
	if len(viewKeyRoots) != len(Views) {
		t.Errorf("AppendViewKey keys %d kinds, Views decodes %d", len(viewKeyRoots), len(Views))
	}
	for gvk := range Views {
		n, ok := viewKeyRoots[gvk]
		if !ok {
			t.Errorf("%v: Views decodes it, AppendViewKey does not key it", gvk)
			continue
		}
		compareKeyTree(t, gvk.Kind, roots[gvk.Kind], n)
	}
}

var (
	annotationsType = reflect.TypeFor[annotationsView]()
	metaType        = reflect.TypeFor[metaView]()
)

// compareKeyTree compares the tree n with what typ decodes at path.
func compareKeyTree(t *testing.T, path string, typ reflect.Type, n *keyNode) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case n.kind == leafNode:
		// The value's bytes whole: whatever the view reads of it is keyed.
	case typ == annotationsType:
		if n.kind != annotationsNode {
			t.Errorf("%s: annotations keyed as %d", path, n.kind)
		}
	case typ.Kind() == reflect.Slice && viewStruct(typ.Elem()):
		if n.kind != arrayNode {
			t.Errorf("%s: an array of the view's structs keyed as %d", path, n.kind)
			return
		}
		compareKeyTree(t, path+"[]", typ.Elem(), n.elem)
	case viewStruct(typ):
		if n.kind != objectNode {
			t.Errorf("%s: a view struct keyed as %d", path, n.kind)
			return
		}
		var names []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names = append(names, name)
			child, ok := n.fields[name]
			if !ok {
				t.Errorf("%s.%s: decoded by the view, not keyed", path, name)
				continue
			}
			if typ == metaType && name == "name" && child.kind == nameNode {
				continue
			}
			compareKeyTree(t, path+"."+name, f.Type, child)
		}
		for name := range n.fields {
			if !slices.Contains(names, name) {
				t.Errorf("%s.%s: keyed, not decoded by the view", path, name)
			}
		}
	default:
		// A type of Kubernetes' or Go's, keyed whole (above); only
		// resourceClaims may be required empty instead.
		if !strings.HasSuffix(path, ".resourceClaims") || n.kind != emptyNode {
			t.Errorf("%s: %v keyed as %d, want its bytes whole", path, typ, n.kind)
		}
	}
}

// viewStruct reports a struct type of this package's view types (named
// or anonymous), whose fields the scan follows.
func viewStruct(typ reflect.Type) bool {
	return typ.Kind() == reflect.Struct && (typ.PkgPath() == reflect.TypeFor[podView]().PkgPath() || typ.Name() == "")
}

// goldenObjects are the webhook's golden inputs and outputs as JSON, by
// file name: Deployments, StatefulSets, Jobs, CronJobs and Pods as written
// and as injected.
func goldenObjects(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../testdata/golden/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("golden files: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		y, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(j, &head) != nil || head.Kind == "" {
			continue
		}
		out[filepath.Base(f)] = j
	}
	return out
}

func gvkOf(t testing.TB, raw []byte) metav1.GroupVersionKind {
	t.Helper()
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		t.Fatal(err)
	}
	for gvk := range Views {
		if gvk.Kind == head.Kind {
			return gvk
		}
	}
	t.Fatalf("no view decoder for %s", head.Kind)
	return metav1.GroupVersionKind{}
}

// edit applies f to raw decoded as generic JSON and encodes it again.
func edit(t testing.TB, raw []byte, f func(obj map[string]any)) []byte {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	f(obj)
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// podSpecs returns the object's pod specs and pod metadata (the Pod's own,
// or its template's).
func podSpecs(obj map[string]any) (spec, meta map[string]any) {
	spec, _ = obj["spec"].(map[string]any)
	if spec == nil {
		return nil, nil
	}
	if jt, ok := spec["jobTemplate"].(map[string]any); ok {
		spec, _ = jt["spec"].(map[string]any)
	}
	if tpl, ok := spec["template"].(map[string]any); ok {
		s, _ := tpl["spec"].(map[string]any)
		m, _ := tpl["metadata"].(map[string]any)
		return s, m
	}
	m, _ := obj["metadata"].(map[string]any)
	return spec, m
}

// viewOf decodes raw with Views, as the validating webhook does.
func viewOf(t testing.TB, gvk metav1.GroupVersionKind, raw []byte, all bool) any {
	t.Helper()
	o, err := Views[gvk](raw, all)
	if err != nil {
		return "does not decode" // its message names a byte offset
	}
	return o.Target
}

// TestViewKeyIgnoresWhatViewsSkip: on every golden object, changing what
// the view decoders skip (status, volumes, mounts, environment, the uid,
// the resource version, managed fields, unknown fields, annotations other
// than modelgate.io/ ones) leaves the key as it was and the view as it
// was; changing the name changes only the name; changing any field the view
// reads changes the key.
func TestViewKeyIgnoresWhatViewsSkip(t *testing.T) {
	for file, raw := range goldenObjects(t) {
		gvk := gvkOf(t, raw)
		for _, all := range []bool{false, true} {
			_, _, ok := AppendViewKey(gvk, raw, all, nil)
			if !ok {
				var claims any
				edit(t, raw, func(obj map[string]any) { spec, _ := podSpecs(obj); claims = spec["resourceClaims"] })
				if claims == nil {
					t.Errorf("%s: not keyed", file)
				}
				continue
			}
			same := map[string]func(obj map[string]any){
				"status":  func(obj map[string]any) { obj["status"] = map[string]any{"phase": "Running", "x": []any{1, "y"}} },
				"unknown": func(obj map[string]any) { obj["zzz"] = map[string]any{"metadata": map[string]any{"name": "other"}} },
				"uid and version": func(obj map[string]any) {
					m := obj["metadata"].(map[string]any)
					m["uid"], m["resourceVersion"], m["creationTimestamp"] = "0000-1111", "42", "2026-11-30T00:00:00Z"
					m["managedFields"] = []any{map[string]any{"manager": "kubectl", "fieldsV1": map[string]any{"f:spec": map[string]any{}}}}
				},
				"volumes and mounts": func(obj map[string]any) {
					spec, _ := podSpecs(obj)
					spec["volumes"] = []any{map[string]any{"name": "kube-api-access-x7k2p", "projected": map[string]any{}}}
					for _, c := range spec["containers"].([]any) {
						c := c.(map[string]any)
						c["volumeMounts"] = []any{map[string]any{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets"}}
						c["env"] = []any{map[string]any{"name": "POD_IP", "value": "10.0.0.7"}}
					}
				},
			}
			if !all {
				same["other annotations"] = func(obj map[string]any) {
					m := obj["metadata"].(map[string]any)
					if a, _ := m["annotations"].(map[string]any); a != nil {
						a["kubectl.kubernetes.io/last-applied-configuration"] = strings.Repeat("{}", 100)
					}
				}
			}
			for what, f := range same {
				// Re-encoded with no change first: the baseline's bytes.
				base := edit(t, raw, func(map[string]any) {})
				baseKey, baseName, _ := AppendViewKey(gvk, base, all, nil)
				changed := edit(t, raw, f)
				k, n, ok := AppendViewKey(gvk, changed, all, nil)
				if !ok || !bytes.Equal(k, baseKey) || !bytes.Equal(n, baseName) {
					t.Errorf("%s (all annotations %t): changing %s changed the key", file, all, what)
				}
				if before, after := viewOf(t, gvk, base, all), viewOf(t, gvk, changed, all); !equality.Semantic.DeepEqual(before, after) {
					t.Errorf("%s: changing %s, which the key leaves out, changed the view:\n%s\n%s", file, what, asJSON(before), asJSON(after))
				}
			}
			renamed := edit(t, raw, func(obj map[string]any) { obj["metadata"].(map[string]any)["name"] = "another-name" })
			k, n, _ := AppendViewKey(gvk, renamed, all, nil)
			base := edit(t, raw, func(map[string]any) {})
			baseKey, baseName, _ := AppendViewKey(gvk, base, all, nil)
			if !bytes.Equal(k, baseKey) || bytes.Equal(n, baseName) || string(n) != `"another-name"` {
				t.Errorf("%s: renaming gave key change %t, name %s (was %s)", file, !bytes.Equal(k, baseKey), n, baseName)
			}
			differ := map[string]func(obj map[string]any){
				"an image": func(obj map[string]any) {
					spec, _ := podSpecs(obj)
					spec["containers"].([]any)[0].(map[string]any)["image"] = "registry.example/other:1"
				},
				"a pod label": func(obj map[string]any) {
					_, m := podSpecs(obj)
					l, _ := m["labels"].(map[string]any)
					if l == nil {
						l = map[string]any{}
						m["labels"] = l
					}
					l["team"] = "other"
				},
				"hostPID": func(obj map[string]any) { spec, _ := podSpecs(obj); spec["hostPID"] = true },
				"a modelgate.io annotation": func(obj map[string]any) {
					m := obj["metadata"].(map[string]any)
					a, _ := m["annotations"].(map[string]any)
					if a == nil {
						a = map[string]any{}
						m["annotations"] = a
					}
					a["modelgate.io/team"] = "x"
				},
			}
			for what, f := range differ {
				k, _, ok := AppendViewKey(gvk, edit(t, raw, f), all, nil)
				if ok && bytes.Equal(k, baseKey) {
					t.Errorf("%s: changing %s left the key as it was", file, what)
				}
			}
		}
	}
}

// TestViewKeyRefuses: what AppendViewKey leaves to the decoder.
func TestViewKeyRefuses(t *testing.T) {
	pod := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	for name, raw := range map[string]string{
		"resource claims":                   `{"metadata":{"name":"a"},"spec":{"resourceClaims":[{"name":"gpu"}]}}`,
		"a name twice":                      `{"metadata":{"name":"a","name":"b"}}`,
		"an escaped field name":             `{"metadata":{"na\u006de":"a"}}`,
		"spec not an object":                `{"spec":3}`,
		"containers not an array":           `{"spec":{"containers":{}}}`,
		"a skipped annotation not a string": `{"metadata":{"annotations":{"a":1}}}`,
		"truncated":                         `{"metadata":{"name":"a"}`,
		"trailing bytes":                    `{"metadata":{}} x`,
		"not an object":                     `[1]`,
	} {
		if _, _, ok := AppendViewKey(pod, []byte(raw), false, nil); ok {
			t.Errorf("%s: keyed %s", name, raw)
		}
	}
	if _, _, ok := AppendViewKey(metav1.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaim"}, []byte(`{}`), false, nil); ok {
		t.Error("a kind Views does not decode was keyed")
	}
	for name, raw := range map[string]string{
		"empty claims":  `{"metadata":{"name":"a"},"spec":{"resourceClaims":[ ]}}`,
		"null claims":   `{"metadata":{"name":"a"},"spec":{"resourceClaims":null}}`,
		"whitespace":    " {\n\"metadata\" : { \"name\" : \"a\" } , \"spec\" : { } }\n",
		"empty":         `{}`,
		"escaped value": `{"metadata":{"name":"a\"b","labels":{"x":"\\"}}}`,
	} {
		if _, _, ok := AppendViewKey(pod, []byte(raw), false, nil); !ok {
			t.Errorf("%s: not keyed %s", name, raw)
		}
	}
}

// FuzzViewKey: two Pods that key alike, with the same name, decode to the
// same view, whatever their bytes; the seeds are pairs that differ in what
// the view skips.
func FuzzViewKey(f *testing.F) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"},"annotations":{"modelgate.io/model":"hf://o/m","x":"y"}},` +
		`"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"nvidia.com/gpu":"1"}},"volumeMounts":[{"name":"v"}]}],"volumes":[{"name":"v"}]}}`
	f.Add([]byte(pod), []byte(strings.Replace(pod, `"volumes":[{"name":"v"}]`, `"volumes":[{"name":"w"}]`, 1)), false)
	f.Add([]byte(pod), []byte(strings.Replace(pod, `"x":"y"`, `"x":"z"`, 1)), false)
	f.Add([]byte(pod), []byte(strings.Replace(pod, `"x":"y"`, `"x":"z"`, 1)), true)
	f.Add([]byte(pod), []byte(strings.Replace(pod, `{"name":"p",`, `{"name":"p","uid":"u",`, 1)), false)
	f.Add([]byte(pod), []byte(strings.Replace(pod, `"image":"i"`, `"image":"j"`, 1)), false)
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	f.Fuzz(func(t *testing.T, a, b []byte, all bool) {
		if !json.Valid(a) || !json.Valid(b) {
			return // the review's envelope is checked as JSON first
		}
		ka, na, oka := AppendViewKey(gvk, a, all, nil)
		kb, nb, okb := AppendViewKey(gvk, b, all, nil)
		if !oka || !okb || !bytes.Equal(ka, kb) || !bytes.Equal(na, nb) {
			return
		}
		if va, vb := viewOf(t, gvk, a, all), viewOf(t, gvk, b, all); !equality.Semantic.DeepEqual(va, vb) {
			t.Errorf("same key, different views:\n%s\n%s\na: %s\nb: %s", asJSON(va), asJSON(vb), a, b)
		}
	})
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// BenchmarkAppendViewKey keys the largest golden object, as a review's
// raw key does, against decoding it for the view (Views) in the same run.
func BenchmarkAppendViewKey(b *testing.B) {
	var name string
	var raw []byte
	for n, r := range goldenObjects(b) {
		if len(r) > len(raw) && strings.HasSuffix(n, ".out.yaml") {
			name, raw = n, r
		}
	}
	gvk := gvkOf(b, raw)
	b.Logf("%s, %d bytes", name, len(raw))
	b.Run("key", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		buf := make([]byte, 0, 8192)
		for b.Loop() {
			buf, _, _ = AppendViewKey(gvk, raw, false, buf[:0])
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Views[gvk](raw, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestViewKeyManyEscapes: a value of a million escapes, a quote among
// them, is scanned to its end in one pass (a scan that searched again for
// the closing quote after every escape would take hours here), and keyed
// apart from the same value with one escape changed.
func TestViewKeyManyEscapes(t *testing.T) {
	pod := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	value := strings.Repeat(`\\`, 1<<20) + `\"` + strings.Repeat(`\n`, 1<<20)
	obj := func(v string) []byte {
		return []byte(`{"metadata":{"name":"a","annotations":{"modelgate.io/x":"` + v + `","other":"` + v + `"}},"spec":{}}`)
	}
	key, name, ok := AppendViewKey(pod, obj(value), false, nil)
	if !ok || string(name) != `"a"` {
		t.Fatalf("not keyed (ok %t, name %s)", ok, name)
	}
	other, _, ok := AppendViewKey(pod, obj(strings.Replace(value, `\"`, `\t`, 1)), false, nil)
	if !ok || bytes.Equal(key, other) {
		t.Errorf("ok %t: a changed escape left the key as it was", ok)
	}
}
