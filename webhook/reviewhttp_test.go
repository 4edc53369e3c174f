package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// reviewBodyOf is an AdmissionReview of req in apiVersion, as the API
// server sends it.
func reviewBodyOf(t testing.TB, apiVersion string, req admission.Request) []byte {
	t.Helper()
	return toJSON(t, admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
}

// serve answers body with h, and returns the status and body written.
func serve(h http.Handler, contentType string, body []byte) (int, []byte) {
	r := httptest.NewRequest(http.MethodPost, "/mutate?timeout=5s", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// panicking is a handler that panics.
type panicking struct{}

func (panicking) Handle(context.Context, admission.Request) admission.Response { panic("boom") }

// TestReviewHTTPAnswersAsAdmissionWebhook holds reviewHTTP to
// controller-runtime's admission.Webhook, which it replaces: the same
// bytes for every review a handler answers (the golden inputs, injected
// or not, v1 and v1beta1, one without a type, one without a request, a
// panic), and the same status and result code for bodies that are not
// reviews.
func TestReviewHTTPAnswersAsAdmissionWebhook(t *testing.T) {
	mutating := NewMutating(loadGoldenConfig(t), goldenNamespaces, NewMetrics(nil))
	ours, theirs := newReviewHTTP(mutating), &admission.Webhook{Handler: mutating, RecoverPanic: ptr.To(true)}
	same := map[string][]byte{}
	for name, path := range goldenInputs(t) {
		in := readGoldenInput(t, path)
		same[name] = reviewBodyOf(t, "admission.k8s.io/v1", in.request(admissionv1.Create, in.raw, nil))
		same[name+" in v1beta1"] = reviewBodyOf(t, "admission.k8s.io/v1beta1", in.request(admissionv1.Create, in.raw, nil))
	}
	plain := create(t, object("Deployment", nsPlain, builders.Options{}), alice)
	same["not opted in"] = reviewBodyOf(t, "admission.k8s.io/v1", plain)
	same["no type"] = bytes.Replace(reviewBodyOf(t, "admission.k8s.io/v1", plain), []byte(`"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1",`), nil, 1)
	same["no request"] = []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`)
	if !bytes.Contains(same["no type"], []byte(`{"request":`)) {
		t.Fatalf("the untyped review still has a type: %s", same["no type"][:80])
	}
	for name, body := range same {
		t.Run(name, func(t *testing.T) {
			wantCode, want := serve(theirs, "application/json", body)
			gotCode, got := serve(ours, "application/json", body)
			if gotCode != wantCode || !bytes.Equal(got, want) {
				t.Errorf("answer %d %s\nadmission.Webhook's %d %s", gotCode, got, wantCode, want)
			}
		})
	}
	t.Run("a panic", func(t *testing.T) {
		body := reviewBodyOf(t, "admission.k8s.io/v1", plain)
		wantCode, want := serve(&admission.Webhook{Handler: panicking{}, RecoverPanic: ptr.To(true)}, "application/json", body)
		gotCode, got := serve(newReviewHTTP(panicking{}), "application/json", body)
		if gotCode != wantCode || !bytes.Equal(got, want) {
			t.Errorf("answer %d %s\nadmission.Webhook's %d %s", gotCode, got, wantCode, want)
		}
	})

	// Stricter than admission.Webhook, which reads these as reviews of
	// the version they name (or an empty v1 one) and runs the handler:
	// none is a review the API server sends.
	for name, body := range map[string][]byte{
		"empty":           nil,
		"another kind":    []byte(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{}}`),
		"unknown version": []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v2","request":{}}`),
	} {
		t.Run(name, func(t *testing.T) {
			code, got := serve(ours, "application/json", body)
			var g admissionv1.AdmissionReview
			if err := json.Unmarshal(got, &g); err != nil || code != http.StatusOK || g.Response == nil || g.Response.Allowed || g.Response.Result.Code != http.StatusBadRequest {
				t.Errorf("answer %d %s (%v): want a review answered 400", code, got, err)
			}
		})
	}

	bad := map[string]struct {
		contentType string
		body        []byte
	}{
		"not JSON":                  {"application/json", []byte("{not json")},
		"wrong content type":        {"text/plain", reviewBodyOf(t, "admission.k8s.io/v1", plain)},
		"no content type":           {"", reviewBodyOf(t, "admission.k8s.io/v1", plain)},
		"a field of the wrong type": {"application/json", []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":7}}`)},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			wantCode, want := serve(theirs, tc.contentType, tc.body)
			gotCode, got := serve(ours, tc.contentType, tc.body)
			var w, g admissionv1.AdmissionReview
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatalf("admission.Webhook's answer %s: %v", want, err)
			}
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("answer %s: %v", got, err)
			}
			if gotCode != wantCode || g.Response == nil || g.Response.Allowed || g.Response.Result.Code != w.Response.Result.Code {
				t.Errorf("answer %d %s\nadmission.Webhook's %d %s", gotCode, got, wantCode, want)
			}
			if !strings.Contains(string(got), `"code":400`) {
				t.Errorf("answer %s: want a 400", got)
			}
		})
	}
}

// BenchmarkReviewHTTP is a whole review through the HTTP handler, from the
// body to the answer written (no TLS, no network): controller-runtime's
// admission.Webhook, the baseline, and reviewHTTP, for the typical vLLM
// Deployment's mutating review and its validating review under the policy
// library.
func BenchmarkReviewHTTP(b *testing.B) {
	mutating := NewMutating(config.New(), testNamespaces, NewMetrics(nil))
	validating := NewValidating(config.New(), libraryEngine(b), testNamespaces, NewPolicyMetrics(nil))
	a := map[string]string{
		"modelgate.io/inject": "true", "modelgate.io/model": "hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
		"modelgate.io/gpu": "1", "modelgate.io/gpu-product": "NVIDIA-H100-80GB-HBM3", "modelgate.io/engine": "vllm",
	}
	paths := []struct {
		name    string
		handler admission.Handler
		body    []byte
	}{
		{"mutate", mutating, reviewBodyOf(b, "admission.k8s.io/v1", create(b, object("Deployment", nsPlain, benchDeployment(builders.Options{TemplateAnnotations: a})), alice))},
		{"validate", validating, reviewBodyOf(b, "admission.k8s.io/v1", injectedReview(b))},
	}
	for _, p := range paths {
		for _, s := range []struct {
			name string
			h    http.Handler
		}{
			{"admission.Webhook", &admission.Webhook{Handler: p.handler, RecoverPanic: ptr.To(true)}},
			{"reviewHTTP", newReviewHTTP(p.handler)},
		} {
			b.Run(p.name+"/"+s.name, func(b *testing.B) {
				if code, out := serve(s.h, "application/json", p.body); code != http.StatusOK || !bytes.Contains(out, []byte(`"allowed":true`)) {
					b.Fatalf("%d %s", code, out)
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(p.body)))
				for b.Loop() {
					serve(s.h, "application/json", p.body)
				}
			})
		}
	}
}

// FuzzReviewHTTP sends arbitrary bodies to /mutate's review handler, which
// anyone who reaches port 9443 may do: it answers every body with an
// AdmissionReview, never panics, and whatever it lets through
// controller-runtime's admission.Webhook answers the same, byte for byte.
func FuzzReviewHTTP(f *testing.F) {
	mutating := newHandler()
	plain := create(f, object("Deployment", nsPlain, builders.Options{}), alice)
	optedIn := create(f, object("Deployment", nsPlain, builders.Options{TemplateAnnotations: map[string]string{
		"modelgate.io/inject": "true", "modelgate.io/model": "hf://org/model", "modelgate.io/gpu": "1"}}), alice)
	for _, req := range []admission.Request{plain, optedIn} {
		f.Add(reviewBodyOf(f, "admission.k8s.io/v1", req))
		f.Add(reviewBodyOf(f, "admission.k8s.io/v1beta1", req))
	}
	f.Add([]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"x","kind":{"group":"apps","version":"v1","kind":"Deployment"},"operation":"CREATE","object":{"metadata":{"Annotations":{"modelgate.io/inject":"true"}}}}}`))
	f.Add([]byte(`{"request":{"uid":"x"}}`))
	f.Add([]byte(`[]`))
	ours, theirs := newReviewHTTP(mutating), &admission.Webhook{Handler: mutating, RecoverPanic: ptr.To(true)}
	f.Fuzz(func(t *testing.T, body []byte) {
		code, got := serve(ours, "application/json", body)
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(got, &ar); err != nil || code != http.StatusOK || ar.Response == nil {
			t.Fatalf("answer %d %q (%v): not an AdmissionReview", code, got, err)
		}
		if ar.Response.Result != nil && ar.Response.Result.Code == http.StatusBadRequest && !ar.Response.Allowed {
			return // refused as unreadable
		}
		wantCode, want := serve(theirs, "application/json", body)
		if wantCode != code || !bytes.Equal(got, want) {
			t.Fatalf("answer %s\nadmission.Webhook's %s", got, want)
		}
	})
}

// TestObjectInBody: the review's object and old object are the body's own
// bytes, not copies (rawInBody relies on the decoder handing out slices of
// its input: were that to change, this fails before anything is
// corrupted), and a null old object stays empty.
func TestObjectInBody(t *testing.T) {
	body := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",` +
		`"object":{"kind":"Pod","metadata":{"name":"p"}},"oldObject":null}}`)
	var ar envelope
	if err := jsonv2.Unmarshal(body, &ar, rawInBody); err != nil {
		t.Fatal(err)
	}
	raw := ar.Request.Object.Raw
	if want := `{"kind":"Pod","metadata":{"name":"p"}}`; string(raw) != want {
		t.Fatalf("object = %s, want %s", raw, want)
	}
	start := bytes.Index(body, raw)
	if &raw[0] != &body[start] {
		t.Error("the object is a copy of the body's bytes")
	}
	if cap(raw) != len(raw) {
		t.Errorf("cap %d > len %d: an append would write into the body", cap(raw), len(raw))
	}
	if ar.Request.OldObject.Raw != nil {
		t.Errorf("oldObject null = %q, want empty", ar.Request.OldObject.Raw)
	}
}
