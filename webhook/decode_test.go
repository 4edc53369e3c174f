package webhook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
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
		for gvk := range decoders {
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
		for gvk := range decoders {
			sameDecode(t, gvk, raw)
		}
	})
}

func sameDecode(t *testing.T, gvk metav1.GroupVersionKind, raw []byte) {
	t.Helper()
	got, err := decoders[gvk](raw)
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
	if diff := cmp.Diff(want, got.obj); diff != "" {
		t.Fatalf("%s: %q decodes differently (-reference +ours):\n%s", gvk.Kind, raw, diff)
	}
}

// anyObject is an empty object of the kind, as its decoder builds it.
func anyObject(gvk metav1.GroupVersionKind) any {
	d, err := decoders[gvk]([]byte(`{}`))
	if err != nil {
		panic(err)
	}
	return d.obj
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
