package webhook

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"

	"github.com/modelgate/modelgate/webhook/decode"
)

// TestViewDecodingRandomObjects: objects with every field filled at random
// (each pointer, slice and map set or not) give the policies the same view,
// settings, serving container and metadata through decode.Views as through
// the whole decoding: a field the view reads that decode/viewtypes.go forgot
// shows here.
func TestViewDecodingRandomObjects(t *testing.T) {
	f := randfill.New().NilChance(0.3).NumElements(0, 3).MaxDepth(12).
		RandSource(rand.NewSource(1)).
		Funcs(
			func(q *resource.Quantity, c randfill.Continue) {
				*q = *resource.NewMilliQuantity(c.Int63n(1<<40), []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}[c.Intn(3)])
			},
			func(l *corev1.ResourceList, c randfill.Continue) {
				*l = corev1.ResourceList{}
				for _, name := range []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "cpu", "memory", corev1.ResourceName(c.String(8))} {
					if c.Bool() {
						(*l)[name] = *resource.NewQuantity(c.Int63n(9), resource.DecimalSI)
					}
				}
			},
			func(v *intstr.IntOrString, c randfill.Continue) {
				if c.Bool() {
					*v = intstr.FromInt32(c.Int31())
				} else {
					*v = intstr.FromString(c.String(8))
				}
			},
			func(tm *metav1.Time, c randfill.Continue) {
				*tm = metav1.NewTime(time.Unix(c.Int63n(1<<32), 0).UTC())
			},
			func(tm *metav1.MicroTime, c randfill.Continue) {
				*tm = metav1.NewMicroTime(time.Unix(c.Int63n(1<<32), 0).UTC())
			},
			func(r *runtime.RawExtension, _ randfill.Continue) { *r = runtime.RawExtension{} },
			func(f *metav1.FieldsV1, _ randfill.Continue) { *f = metav1.FieldsV1{} },
			func(m *map[string]string, c randfill.Continue) {
				// Annotations and labels modelgate reads, among others.
				*m = map[string]string{}
				for _, k := range []string{"modelgate.io/inject", "modelgate.io/gpu", "modelgate.io/engine", "modelgate.io/model", "modelgate.io/owner", c.String(10)} {
					if c.Bool() {
						(*m)[k] = []string{"true", "2", "vllm", "hf://org/model", c.String(5)}[c.Intn(5)]
					}
				}
			},
		)
	kinds := map[string]func() any{
		"Pod": func() any { return &corev1.Pod{} }, "Deployment": func() any { return &appsv1.Deployment{} },
		"StatefulSet": func() any { return &appsv1.StatefulSet{} }, "Job": func() any { return &batchv1.Job{} },
		"CronJob": func() any { return &batchv1.CronJob{} },
	}
	for gvk := range decode.Whole {
		t.Run(gvk.Kind, func(t *testing.T) {
			for range 150 {
				obj := kinds[gvk.Kind]()
				f.Fill(obj)
				raw, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := decode.Whole[gvk](raw); err != nil {
					t.Fatalf("the whole decoding refuses a filled %s: %v", gvk.Kind, err)
				}
				sameView(t, gvk, raw, false)
				sameView(t, gvk, raw, true)
			}
		})
	}
}

// TestViewDecodersCoverDecoders: the validating webhook can decode every
// kind admit lets through.
func TestViewDecodersCoverDecoders(t *testing.T) {
	for gvk := range decode.Whole {
		if decode.Views[gvk] == nil {
			t.Errorf("%v: no view decoder", gvk)
		}
	}
	if len(decode.Views) != len(decode.Whole) {
		t.Errorf("%d view decoders for %d kinds", len(decode.Views), len(decode.Whole))
	}
}

// TestViewDecodingErrorsQuoteNothing: a decoding error says what and
// where, not the value it stopped at.
func TestViewDecodingErrorsQuoteNothing(t *testing.T) {
	const secret = "s3cr3t-t0ken-value"
	deployment := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for _, bad := range []string{
		`{"spec":{"template":{"spec":{"containers":[{"name":{"x":"` + secret + `"}}]}}}}`,
		`{"metadata":{"labels":{"a":` + secret + `}}}`,
		`{"metadata":{"name":"` + secret + `"`,
	} {
		_, err := judgedDecoding(false, false)(deployment, []byte(bad))
		if err == nil {
			t.Errorf("%s: accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), secret[:6]) || !strings.HasPrefix(err.Error(), "decoding object: ") {
			t.Errorf("%s: error %q", bad, err)
		}
	}
}
