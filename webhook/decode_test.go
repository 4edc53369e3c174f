package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/mutators"
	pworkload "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook/decode"
)

// reference decodes with the decoder of the API server and of
// controller-runtime's admission.Decoder: sigs.k8s.io/json, case-sensitive,
// integers kept.
func reference(raw []byte, into any) error {
	return kjson.UnmarshalCaseSensitivePreserveInts(raw, into)
}

// trickyObjects are what a typed decode can get wrong: quantities in
// every notation, times, int-or-strings, nulls, escapes, case variants of
// field names (which the API server ignores), unknown fields.
var trickyObjects = []string{
	`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","creationTimestamp":"2026-01-02T03:04:05Z",` +
		`"deletionTimestamp":null,"labels":{"x":"\u00e9\ud83d\ude00\n"},"annotations":{},"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"n","uid":"u","controller":true}],` +
		`"managedFields":[{"manager":"m","operation":"Apply","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:x":{}}},"time":"2026-01-02T03:04:05Z"}]},` +
		`"spec":{"replicas":3,"selector":{"matchLabels":{"app":"a"}},"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":1}},` +
		`"template":{"metadata":{"labels":{"app":"a"}},"spec":{"Containers":[{"name":"ignored"}],"containers":[{"name":"c","image":"i",` +
		`"resources":{"limits":{"cpu":"1500m","memory":"64Gi","nvidia.com/gpu":"1","ephemeral-storage":"1e3","x":"0.5"},"requests":{"cpu":"0.1","memory":"1.5G"}},` +
		`"ports":[{"containerPort":8000,"protocol":"TCP"}],"readinessProbe":{"httpGet":{"path":"/h","port":"http"},"periodSeconds":10},` +
		`"livenessProbe":{"tcpSocket":{"port":8000}},"env":[{"name":"A","value":""},{"name":"B","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}]}],` +
		`"volumes":[{"name":"s","emptyDir":{"medium":"Memory","sizeLimit":"16Gi"}},{"name":"p","persistentVolumeClaim":{"claimName":"c"}}],` +
		`"tolerations":[{"key":"k","operator":"Exists","tolerationSeconds":300}],"unknownField":{"deep":[1,2.5,"x",null,true]}}}},` +
		`"status":{"replicas":1,"conditions":[{"type":"Available","status":"True","lastUpdateTime":"2026-01-02T03:04:05Z"}]}}`,
	`{"kind":"Pod","metadata":{"name":"p","labels":null},"spec":{"containers":null,"initContainers":[],"nodeSelector":{"a":"b"},"priority":-5,"overhead":{"cpu":"250m"}}}`,
	`{"metadata":{"name":"j"},"spec":{"backoffLimit":0,"activeDeadlineSeconds":9007199254740993,"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","command":["a","b"],"args":[]}]}}}}`,
	`{"metadata":{"managedFields":null},"spec":{"volumeClaimTemplates":[{"metadata":{"name":"d","annotations":{"a":"b","modelgate.io/x":"y"},"managedFields":[{"manager":"x"}]}}],` +
		`"template":{"spec":{"volumes":[{"name":"e","ephemeral":{"volumeClaimTemplate":{"metadata":{"annotations":{"c":"d"}}}}}]}}}}`,
	`{"spec":{"schedule":"*/5 * * * *","jobTemplate":{"metadata":{"annotations":{"a":"b"}},"spec":{"template":{"metadata":{},"spec":{"containers":[{"name":"x"}]}}}}}}`,
}

// TestDecodeAsTheAPIServer: every golden input and output, every sample
// and the tricky objects decode to the same typed object as with the
// reference decoder, for every kind the webhooks decode.
func TestDecodeAsTheAPIServer(t *testing.T) {
	var inputs [][]byte
	for _, o := range trickyObjects {
		inputs = append(inputs, []byte(o))
	}
	files, _ := filepath.Glob("testdata/golden/*.yaml")
	samples, _ := filepath.Glob("../config/samples/*.yaml")
	if len(files) < 10 || len(samples) < 3 {
		t.Fatalf("found %d golden files and %d samples", len(files), len(samples))
	}
	for _, f := range append(files, samples...) {
		y, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		inputs = append(inputs, j)
	}
	for _, raw := range inputs {
		for gvk := range decode.Whole {
			sameDecode(t, gvk, raw)
		}
	}
}

// FuzzDecodeAsTheAPIServer: for any input the reference decoder accepts,
// with no duplicate names and valid UTF-8 (as everything the API server
// sends), the typed objects are equal.
func FuzzDecodeAsTheAPIServer(f *testing.F) {
	for _, o := range trickyObjects {
		f.Add([]byte(o))
	}
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !utf8.Valid(raw) || hasDuplicateNames(raw) {
			return
		}
		for gvk := range decode.Whole {
			sameDecode(t, gvk, raw)
			sameDecodeSkipping(t, gvk, raw)
			sameView(t, gvk, raw, false)
			sameView(t, gvk, raw, true)
		}
	})
}

func sameDecode(t *testing.T, gvk metav1.GroupVersionKind, raw []byte) {
	t.Helper()
	got, err := decode.Whole[gvk](raw)
	// The reference decodes into a fresh object of the same type.
	want := reflect.New(reflect.TypeOf(anyObject(gvk)).Elem()).Interface()
	werr := reference(raw, want)
	switch {
	case werr != nil && err == nil && len(raw) > 0:
		t.Fatalf("%s: accepted %q, which the API server's decoder refuses: %v", gvk.Kind, raw, werr)
	case werr == nil && err != nil:
		t.Fatalf("%s: refused %q, which the API server's decoder accepts: %v", gvk.Kind, raw, err)
	case err != nil:
		return
	}
	if diff := cmp.Diff(want, got.Obj); diff != "" {
		t.Fatalf("%s: %q decodes differently (-reference +ours):\n%s", gvk.Kind, raw, diff)
	}
}

// anyObject is an empty object of the kind, as its decoder builds it.
func anyObject(gvk metav1.GroupVersionKind) any {
	d, err := decode.Whole[gvk]([]byte(`{}`))
	if err != nil {
		panic(err)
	}
	return d.Obj
}

// hasDuplicateNames reports whether some JSON object of raw names a
// member twice; false for what does not tokenize.
func hasDuplicateNames(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	// One frame per open object (its names) or array (nil).
	var stack []map[string]bool
	wantName := false // the next token is an object's member name or its end
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, map[string]bool{})
				wantName = true
			case '[':
				stack = append(stack, nil)
				wantName = false
			default: // '}' or ']': the value of the enclosing member ends
				stack = stack[:len(stack)-1]
				wantName = len(stack) > 0 && stack[len(stack)-1] != nil
			}
			continue
		}
		if wantName {
			name := tok.(string)
			names := stack[len(stack)-1]
			if names[name] {
				return true
			}
			names[name] = true
			wantName = false
			continue
		}
		wantName = len(stack) > 0 && stack[len(stack)-1] != nil
	}
}

// modelgateOnly is m without the keys outside modelgate.io/, nil for nil.
func modelgateOnly(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, annotations.Prefix) {
			out[k] = v
		}
	}
	return out
}

// sameDecodeSkipping: as the validating webhook decodes when a policy
// reads the raw object (judgedDecoding), the object decodes as the
// reference does but for metadata.managedFields, left empty. Skipping
// managedFields accepts a malformed entry the default decoding refuses:
// nothing reads it.
func sameDecodeSkipping(t *testing.T, gvk metav1.GroupVersionKind, raw []byte) {
	t.Helper()
	got, err := judgedDecoding(true, true)(gvk, raw)
	ref, rerr := decode.Whole[gvk](raw)
	switch {
	case rerr != nil && err == nil && strings.Contains(rerr.Error(), "/metadata/managedFields"):
		return
	case rerr != nil && err == nil:
		t.Fatalf("%s: accepted %q, which the default decoding refuses: %v", gvk.Kind, raw, rerr)
	case rerr == nil && err != nil:
		t.Fatalf("%s: refused %q, which the default decoding accepts: %v", gvk.Kind, raw, err)
	case err != nil:
		return
	}
	eachObjectMeta(reflect.ValueOf(ref.Obj), func(m *metav1.ObjectMeta) { m.ManagedFields = nil })
	if diff := cmp.Diff(ref.Obj, got.Obj); diff != "" {
		t.Fatalf("%s: %q decodes differently (-default +skipping):\n%s", gvk.Kind, raw, diff)
	}
}

// sameView: as the validating webhook decodes when no policy reads the raw
// object (decode.Views), the object gives the policies what the whole
// object decoded as the API server does gives them: the same view, the
// same settings, the same serving container, the same metadata for the
// seal and the Pod UPDATE check; unless annotationsRead, with only the
// modelgate.io/ annotations. The view decoding may accept what the whole
// decoding refuses in a field it does not read, never the reverse.
func sameView(t *testing.T, gvk metav1.GroupVersionKind, raw []byte, annotationsRead bool) {
	t.Helper()
	got, err := judgedDecoding(annotationsRead, false)(gvk, raw)
	ref, rerr := decode.Whole[gvk](raw, decode.SkipManagedFields)
	switch {
	case rerr == nil && err != nil:
		t.Fatalf("%s: refused %q, which the whole decoding accepts: %v", gvk.Kind, raw, err)
	case rerr != nil || err != nil:
		return
	}
	if !annotationsRead {
		for _, m := range ref.Target.Metas() {
			m.Annotations = modelgateOnly(m.Annotations)
		}
	}
	if diff := cmp.Diff(judgedParts(t, ref), judgedParts(t, got), samePath); diff != "" {
		t.Fatalf("%s: %q is judged on different parts (-whole +view):\n%s", gvk.Kind, raw, diff)
	}
}

// samePath compares field paths by what they say.
var samePath = cmp.Comparer(func(a, b *field.Path) bool { return a.String() == b.String() })

// judged is what the validating webhook reads of a decoded object.
type judged struct {
	View     *pworkload.View
	Settings annotations.Settings
	Serving  int
	Metas    []judgedMeta
}

type judgedMeta struct {
	Name, GenerateName, Namespace string
	Deleting                      *metav1.Time
	Labels, Annotations           map[string]string
}

func judgedParts(t *testing.T, d *decode.Object) judged {
	t.Helper()
	settings, _ := annotations.Parser{}.Parse(d.AnnotationSources()...)
	paths := d.AnnotationPaths()
	gpu := gpuKeys(&config.New().Injection)
	serving, _ := mutators.ResolveContainer(d.Target.PodSpec, settings, gpu.ResourceName, paths[len(paths)-1])
	out := judged{
		View: pworkload.Build(pworkload.Source{
			Kind: d.Target.Kind, Object: d.Target.Object, PodMeta: d.Target.PodMeta(), PodSpec: d.Target.PodSpec,
			Settings: settings, GPU: gpu, Sealed: true,
		}),
		Settings: settings,
		Serving:  serving,
	}
	for _, m := range d.Target.Metas() {
		out.Metas = append(out.Metas, judgedMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace,
			Deleting: m.DeletionTimestamp, Labels: orEmptyMap(m.Labels), Annotations: orEmptyMap(m.Annotations)})
	}
	return out
}

// orEmptyMap is m, or an empty map for nil: a Pod UPDATE compares the two
// objects decoded the same way, so the difference never shows.
func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// eachObjectMeta calls f on every ObjectMeta in v: the object's, its
// templates', a StatefulSet's claim templates', ephemeral volumes'.
func eachObjectMeta(v reflect.Value, f func(*metav1.ObjectMeta)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			eachObjectMeta(v.Elem(), f)
		}
	case reflect.Struct:
		if m, ok := v.Addr().Interface().(*metav1.ObjectMeta); ok {
			f(m)
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				eachObjectMeta(v.Field(i), f)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			eachObjectMeta(v.Index(i), f)
		}
	}
}

// TestValidateDecoding: the validating webhook's decoding keeps the
// modelgate.io/ annotations, every label and what the view reads.
func TestValidateDecoding(t *testing.T) {
	deployment := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	big := strings.Repeat(`\"x\"`, 1000)
	raw := []byte(`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"` + big + `","modelgate.io/inject":"true","note":null},` +
		`"labels":{"a":"b"}},"spec":{"template":{"metadata":{"annotations":{"x":"y","modelgate.io/gpu":"2"}},"spec":{"nodeSelector":{"n":"1"},"containers":[{"name":"c","image":"i"}]}}}}`)
	d, err := judgedDecoding(false, false)(deployment, raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"modelgate.io/inject": "true"}, d.Target.Object.Annotations); diff != "" {
		t.Errorf("metadata.annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"modelgate.io/gpu": "2"}, d.Target.Templates[0].Annotations); diff != "" {
		t.Errorf("spec.template.metadata.annotations (-want +got):\n%s", diff)
	}
	if d.Target.Object.Labels["a"] != "b" || len(d.Target.PodSpec.Containers) != 1 || d.Target.PodSpec.Containers[0].Image != "i" {
		t.Errorf("labels %v, containers %v", d.Target.Object.Labels, d.Target.PodSpec.Containers)
	}
	all, err := judgedDecoding(true, false)(deployment, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Target.Object.Annotations; len(got) != 3 || got["note"] != "" || len(got["kubectl.kubernetes.io/last-applied-configuration"]) != 3000 {
		t.Errorf("every annotation kept: %d, %q", len(got), got["note"])
	}
	for _, bad := range []string{
		`{"metadata":{"annotations":{"x":1}}}`, `{"metadata":{"annotations":{"modelgate.io/gpu":2}}}`,
		`{"metadata":{"annotations":[]}}`, `{"metadata":{"annotations":{"x":{"modelgate.io/gpu":"2"}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"name":1}]}}}}`, `{"metadata":`, ``,
	} {
		for _, annotationsRead := range []bool{false, true} {
			if _, err := judgedDecoding(annotationsRead, false)(deployment, []byte(bad)); err == nil {
				t.Errorf("%s: accepted", bad)
			}
		}
	}
	var inputs [][]byte
	for _, o := range trickyObjects {
		inputs = append(inputs, []byte(o))
	}
	inputs = append(inputs, raw)
	for _, in := range inputs {
		for gvk := range decode.Whole {
			sameDecodeSkipping(t, gvk, in)
			sameView(t, gvk, in, false)
			sameView(t, gvk, in, true)
		}
	}
}

// TestValidateSkipsUnreadAnnotations: under the library, which reads no
// annotations, the validating webhook skips them, and answers as it does
// when a policy that reads them (and never fires) makes it decode them all.
func TestValidateSkipsUnreadAnnotations(t *testing.T) {
	lib := samplePolicies(t)
	skipping := NewValidating(config.New(), engineOf(t, lib), testNamespaces, NewPolicyMetrics(nil))
	if set := skipping.checker.Engine.Set(); set.ReadsWorkloadKey("annotations") || set.ReadsWorkloadKey("podAnnotations") || set.NeedsObjects() {
		t.Fatal("the library reads annotations: nothing is skipped, the test proves nothing")
	}
	reader := lib[0].DeepCopy()
	reader.Name = "reads-annotations"
	reader.Spec.Rego = "package reads\n\nwarn contains \"never\" if input.workload.annotations[\"modelgate.io/never\"] == \"x\"\n"
	whole := NewValidating(config.New(), engineOf(t, append(lib, reader)), testNamespaces, NewPolicyMetrics(nil))
	if !whole.checker.Engine.Set().ReadsWorkloadKey("annotations") {
		t.Fatal("the reader policy reads no annotations")
	}
	injected := injectedReview(t)
	plain := create(t, object("Deployment", nsPlain, builders.Options{Annotations: map[string]string{"note": "x"}}), alice)
	ctx := context.Background()
	for name, req := range map[string]admission.Request{
		"injected":                 injected,
		"injected, 100 KB applied": grown(t, injected, 100<<10),
		"not opted in":             plain,
		"not opted in, applied":    grown(t, plain, 10<<10),
	} {
		t.Run(name, func(t *testing.T) {
			got, want := skipping.Handle(ctx, req), whole.Handle(ctx, req)
			if got.Allowed != want.Allowed || !cmp.Equal(got.Result, want.Result) || !cmp.Equal(got.Warnings, want.Warnings) {
				t.Errorf("skipping answers allowed=%v %v %v; decoding all answers allowed=%v %v %v",
					got.Allowed, got.Result, got.Warnings, want.Allowed, want.Result, want.Warnings)
			}
		})
	}
	if resp := skipping.Handle(ctx, plain); resp.Allowed {
		t.Error("the plain Deployment is allowed: the comparison covers no denial")
	}
}

// TestPodUpdateJudgedByObjectAnnotations: a policy that reads the raw
// object's annotations turns the skipping off, so a Pod UPDATE that only
// changes an annotation is judged, not waved through as changing nothing
// the policies judge a Pod by.
func TestPodUpdateJudgedByObjectAnnotations(t *testing.T) {
	reader := samplePolicies(t)[0].DeepCopy()
	reader.Name = "note"
	reader.Spec.Match = policyv1.WorkloadMatch{}
	reader.Spec.Parameters = nil
	reader.Spec.Rego = "package note\n\ndeny contains \"note is x\" if input.object.metadata.annotations.note == \"x\"\n"
	h := NewValidating(config.New(), engineOf(t, []*policyv1.WorkloadPolicy{reader}), testNamespaces, NewPolicyMetrics(nil))
	pod := func(note string) []byte {
		return toJSON(t, object("Pod", nsPlain, builders.Options{Annotations: map[string]string{"note": note}}))
	}
	resp := h.Handle(context.Background(), request("Pod", admissionv1.Update, nsPlain, pod("x"), pod("y"), alice))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "[note] note is x") {
		t.Errorf("an UPDATE that sets the annotation the policy reads: allowed=%v %v, want denied by [note]", resp.Allowed, resp.Result)
	}
}
