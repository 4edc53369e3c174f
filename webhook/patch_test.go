package webhook

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestNamedListOps applies the operations to the encoded "before" list and
// checks that the result is the "after" list, for every shape of change.
func TestNamedListOps(t *testing.T) {
	c := func(name, image string) corev1.Container { return corev1.Container{Name: name, Image: image} }
	cases := map[string]struct {
		before, after []corev1.Container
		wantOps       int // -1: any number
	}{
		"unchanged":                 {before: []corev1.Container{c("a", "1")}, after: []corev1.Container{c("a", "1")}, wantOps: 0},
		"insert first":              {before: []corev1.Container{c("a", "1"), c("b", "1")}, after: []corev1.Container{c("l", "1"), c("a", "1"), c("b", "1")}, wantOps: 1},
		"replace in the middle":     {before: []corev1.Container{c("a", "1"), c("l", "1"), c("b", "1")}, after: []corev1.Container{c("a", "1"), c("l", "2"), c("b", "1")}, wantOps: 1},
		"remove first":              {before: []corev1.Container{c("l", "1"), c("a", "1")}, after: []corev1.Container{c("a", "1")}, wantOps: 1},
		"remove the only one":       {before: []corev1.Container{c("l", "1")}, after: nil, wantOps: 1},
		"add to an empty list":      {before: nil, after: []corev1.Container{c("l", "1")}, wantOps: 1},
		"reordered: whole list":     {before: []corev1.Container{c("a", "1"), c("b", "1")}, after: []corev1.Container{c("b", "1"), c("a", "1")}, wantOps: 1},
		"insert and remove at once": {before: []corev1.Container{c("x", "1"), c("a", "1")}, after: []corev1.Container{c("l", "1"), c("a", "1")}, wantOps: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ops := namedListOps(nil, "/list", tc.before, tc.after, func(c corev1.Container) string { return c.Name })
			if tc.wantOps >= 0 && len(ops) != tc.wantOps {
				t.Errorf("got %d operations %+v, want %d", len(ops), ops, tc.wantOps)
			}
			doc, err := json.Marshal(map[string]any{"list": tc.before})
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.before) == 0 {
				doc = []byte(`{}`)
			}
			patch, err := encodePatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			p, err := jsonpatch.DecodePatch(patch)
			if err != nil {
				t.Fatalf("decoding %s: %v", patch, err)
			}
			out, err := p.Apply(doc)
			if err != nil {
				t.Fatalf("applying %s to %s: %v", patch, doc, err)
			}
			var got struct{ List []corev1.Container }
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.after, got.List, cmpEmptyAsNil); diff != "" {
				t.Errorf("patched list (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppendOnlyOps checks appends and the whole-list fallback.
func TestAppendOnlyOps(t *testing.T) {
	tol := func(k string) corev1.Toleration {
		return corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists}
	}
	if ops := appendOnlyOps(nil, "/t", []corev1.Toleration{tol("a")}, []corev1.Toleration{tol("a"), tol("g")}); len(ops) != 1 || ops[0].Path != "/t/-" {
		t.Errorf("append: got %+v, want one add at /t/-", ops)
	}
	if ops := appendOnlyOps(nil, "/t", nil, []corev1.Toleration{tol("g")}); len(ops) != 1 || ops[0].Path != "/t" {
		t.Errorf("first item: got %+v, want the list added whole", ops)
	}
	if ops := appendOnlyOps(nil, "/t", []corev1.Toleration{tol("a")}, []corev1.Toleration{tol("b")}); len(ops) != 1 || ops[0].Path != "/t" {
		t.Errorf("changed item: got %+v, want the list replaced whole", ops)
	}
}

var cmpEmptyAsNil = cmp.FilterValues(func(a, b []corev1.Container) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

// TestAppendJSONString: every string, printable ASCII or not (control
// characters, quotes, invalid UTF-8), is written as valid JSON that decodes
// to what encoding/json's own encoding of it decodes to.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "add", "/spec/template/metadata/annotations/modelgate.io~1owner", "a\x00b", "tab\there", `"quoted"`, `back\\slash`,
		"<html>&", "é", "\u2028", "\xff\xfe", "\x7f"} {
		got := appendJSONString([]byte("prefix:"), s)
		if !strings.HasPrefix(string(got), "prefix:") {
			t.Fatalf("%q: the prefix is lost: %s", s, got)
		}
		got = got[len("prefix:"):]
		if !json.Valid(got) {
			t.Errorf("%q: %s is not JSON", s, got)
			continue
		}
		want, _ := json.Marshal(s)
		var a, b string
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%q: %s decodes to %q, want %q", s, got, a, b)
		}
	}
}

// TestMapOpPatchesChangedKeys: a map present before and after is patched
// key by key, with keys escaped as JSON pointer tokens (RFC 6901), so that
// keys modelgate did not change, a large last-applied configuration among
// them, are not in the patch; applied, the patch gives the map after.
func TestMapOpPatchesChangedKeys(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	cases := map[string]struct {
		before, after map[string]string
		wantOps       int
	}{
		"keys added, changed and removed": {
			before:  map[string]string{"kubectl.kubernetes.io/last-applied-configuration": big, "modelgate.io/owner": "bob", "a~b": "1", "gone/key": "x"},
			after:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": big, "modelgate.io/owner": "alice", "a~b": "2", "modelgate.io/seal": "v1.x"},
			wantOps: 4,
		},
		"keys JSON escapes (a control character, a quote, a backslash, non-ASCII)": {
			before:  map[string]string{"ctl\x01key": "1", `q"uote\\`: "1", "é/ü": "1", "<kept>": "1"},
			after:   map[string]string{"ctl\x01key": "2", `q"uote\\`: "2", "<kept>": "1"},
			wantOps: 3,
		},
		"a map that appears":  {before: nil, after: map[string]string{"modelgate.io/owner": "alice"}, wantOps: 1},
		"a map that goes":     {before: map[string]string{"modelgate.io/owner": "alice"}, after: nil, wantOps: 1},
		"an empty map filled": {before: map[string]string{}, after: map[string]string{"k": "v"}, wantOps: 1},
		"unchanged":           {before: map[string]string{"k": big}, after: map[string]string{"k": big}, wantOps: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := map[string]any{"metadata": map[string]any{}}
			if tc.before != nil {
				doc["metadata"].(map[string]any)["annotations"] = tc.before
			}
			raw, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			ops := mapOp(nil, "/metadata/annotations", tc.before, tc.after)
			if len(ops) != tc.wantOps {
				t.Fatalf("%d operations, want %d: %v", len(ops), tc.wantOps, ops)
			}
			if len(ops) == 0 {
				return
			}
			encoded, err := encodePatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			if tc.before != nil && tc.after != nil && strings.Contains(string(encoded), big) {
				t.Errorf("the patch carries the unchanged last-applied configuration (%d bytes)", len(encoded))
			}
			patch, err := jsonpatch.DecodePatch(encoded)
			if err != nil {
				t.Fatal(err)
			}
			out, err := patch.Apply(raw)
			if err != nil {
				t.Fatalf("applying %s: %v", encoded, err)
			}
			var got struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.Metadata.Annotations, tc.after) {
				t.Errorf("applied: %v, want %v", got.Metadata.Annotations, tc.after)
			}
		})
	}
}

// TestSameResources: sameResources agrees with equality.Semantic.DeepEqual
// on random resources, and on resources that differ only in how a
// quantity is written or an empty list is left nil.
func TestSameResources(t *testing.T) {
	f := patchValueFiller(3)
	pairs := [][2]corev1.ResourceRequirements{
		{{Limits: corev1.ResourceList{"cpu": resource.MustParse("1")}}, {Limits: corev1.ResourceList{"cpu": resource.MustParse("1000m")}}},
		{{Limits: corev1.ResourceList{}}, {}},
		{{Claims: []corev1.ResourceClaim{}}, {}},
		{{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}, {Claims: []corev1.ResourceClaim{{Name: "gpu", Request: "r"}}}},
		{{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")}}, {Requests: corev1.ResourceList{"memory": resource.MustParse("1")}}},
	}
	for range 2000 {
		var a, b corev1.ResourceRequirements
		f.Fill(&a)
		f.Fill(&b)
		pairs = append(pairs, [2]corev1.ResourceRequirements{a, b}, [2]corev1.ResourceRequirements{a, *a.DeepCopy()})
	}
	equal := 0
	for _, p := range pairs {
		want := equality.Semantic.DeepEqual(p[0], p[1])
		if got := sameResources(&p[0], &p[1]); got != want {
			t.Fatalf("sameResources(%v, %v) = %v, equality.Semantic.DeepEqual says %v", p[0], p[1], got, want)
		}
		if want {
			equal++
		}
	}
	if equal < 2000 {
		t.Errorf("only %d equal pairs", equal)
	}
}
