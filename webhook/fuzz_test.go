package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/webhook/decode"
)

// everyNamespace answers every lookup, with the labels of an opted-in
// namespace or none: the fuzzers' labeler never fails.
type everyNamespace bool

func (e everyNamespace) NamespaceLabels(context.Context, string) (map[string]string, error) {
	if e {
		return testNamespaces[nsEnabled], nil
	}
	return testNamespaces[nsPlain], nil
}

// fuzzSeeds are JSON objects of every kind, plain, opted in, with bad or
// forged metadata, and some broken JSON.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, kind := range builders.Kinds {
		for _, o := range []builders.Options{
			{},
			{Annotations: optIn},
			{TemplateAnnotations: optIn, TemplateLabels: map[string]string{"tier": "gpu"}},
			{Annotations: maybe, TemplateAnnotations: optOut},
			{Labels: forged, TemplateAnnotations: map[string]string{annotations.OwnerFull: "mallory@evil.example"}},
		} {
			b, err := json.Marshal(object(kind, nsPlain, o))
			if err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	return append(seeds,
		[]byte(`{"metadata":`), []byte(``), []byte(`null`), []byte(`[]`), []byte(`{}`),
		[]byte(`{"metadata":{"labels":null,"annotations":{"modelgate.io/inject":"true"}}}`),
		[]byte(`{"metadata":{"annotations":{"modelgate.io/inject":"true"}},"spec":{"template":null,"jobTemplate":{"spec":null}}}`),
		[]byte(`{"metadata":{"annotations":{"modelgate.io/inject":1}}}`),
		[]byte(`{"metadata":{"Annotations":{"modelgate.io/inject":"maybe"}}}`),
		[]byte(`{"metadata":{"creationTimestamp":"9999-12-31T23:59:59-23:59"}}`),
		[]byte(`{"spec":{"containers":[{"resources":{"limits":{"cpu":"1e1000"}}}]}}`),
		// An hf:// model: the serving container's environment is patched
		// around the user's variables, duplicates included.
		[]byte(`{"metadata":{"annotations":{"modelgate.io/inject":"true","modelgate.io/model":"hf://org/repo","modelgate.io/model-cache":"memory","modelgate.io/model-size":"1Gi"}},`+
			`"spec":{"containers":[{"name":"server","args":["--model","org/other"],"env":[{"name":"FOO","value":"1"},{"name":"FOO","value":"2"},{"name":"HF_HUB_OFFLINE","value":"0"}]}]}}`),
	)
}

// FuzzHandleDecode admits arbitrary object bytes as every kind the handler
// decodes. The answer is always an allowance or a denial with a code from
// the house list, and never 500: the labeler does not fail, so nothing else
// is modelgate's own fault.
func FuzzHandleDecode(f *testing.F) {
	seeds := fuzzSeeds(f)
	for i, s := range seeds {
		f.Add(s, seeds[(i+1)%len(seeds)], i%2 == 0, i%3 == 0, i%5 == 0)
	}
	cfg := config.New()
	gvkList := make([]metav1.GroupVersionKind, 0, len(decode.Whole))
	for g := range decode.Whole {
		gvkList = append(gvkList, g)
	}
	slices.SortFunc(gvkList, func(a, b metav1.GroupVersionKind) int { return strings.Compare(a.Kind, b.Kind) })
	allowedCodes := []int32{http.StatusBadRequest, http.StatusForbidden, http.StatusUnprocessableEntity}

	f.Fuzz(func(t *testing.T, raw, oldRaw []byte, isUpdate, nsEnabled, trusted bool) {
		h := NewMutating(cfg, everyNamespace(nsEnabled), NewMetrics(nil))
		user := authenticationv1.UserInfo{Username: alice}
		if trusted {
			user.Username = rsCtrl
		}
		op := admissionv1.Create
		if isUpdate {
			op = admissionv1.Update
		}
		for _, gvk := range gvkList {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Kind: gvk, Namespace: nsPlain, Name: "server", Operation: op, UserInfo: user,
				Object: runtime.RawExtension{Raw: raw},
			}}
			if isUpdate {
				req.OldObject = runtime.RawExtension{Raw: oldRaw}
			}
			resp := h.Handle(context.Background(), req)
			if resp.Allowed {
				if len(patchesOf(resp)) > 0 {
					reviewAgain(t, h, req, resp)
				}
				continue
			}
			if resp.Result == nil {
				t.Fatalf("%s: denied without a Result", gvk.Kind)
			}
			if !slices.Contains(allowedCodes, resp.Result.Code) {
				t.Fatalf("%s: denied with code %d (%s), want one of %v", gvk.Kind, resp.Result.Code, resp.Result.Message, allowedCodes)
			}
		}
	})
}

// reviewAgain applies a patch to the object as the handler serialised it
// and admits the result again: the second answer must patch nothing.
func reviewAgain(t *testing.T, h *Mutating, req admission.Request, resp admission.Response) {
	t.Helper()
	d, err := decode.Whole[req.Kind](req.Object.Raw)
	if err != nil {
		t.Fatalf("%s: patched an object that does not decode: %v", req.Kind.Kind, err)
	}
	req.Object.Raw = applyPatch(t, toJSON(t, d.Obj), resp)
	again := h.Handle(context.Background(), req)
	if !again.Allowed || len(patchesOf(again)) > 0 {
		t.Fatalf("%s: second review of %s: allowed=%v patches=%v result=%+v, want allowed without patches",
			req.Kind.Kind, req.Object.Raw, again.Allowed, patchPaths(again), again.Result)
	}
}

// FuzzAdmissionReview sends arbitrary HTTP bodies through the webhook as
// the API server would. Panics are not recovered, so a handler panic fails
// the fuzzer; every body gets an AdmissionReview with a response.
func FuzzAdmissionReview(f *testing.F) {
	pod, err := json.Marshal(object("Pod", nsPlain, builders.Options{Annotations: optIn}))
	if err != nil {
		f.Fatal(err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0df28fbd-5f5f-4a9e-9c8a-7b6a6b1c1c1c",
			Kind:      gvks["Pod"],
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: nsPlain, Name: "server", Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: alice, Groups: []string{"system:authenticated"}},
			Object:   runtime.RawExtension{Raw: pod},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add(bytes.Replace(body, []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1))
	f.Add(bytes.Replace(body, []byte(`"CREATE"`), []byte(`"UPDATE"`), 1))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"object":{"metadata":1}}}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Add([]byte(`not json at all`))

	wh := &admission.Webhook{Handler: NewMutating(config.New(), everyNamespace(true), NewMetrics(nil)), RecoverPanic: ptr.To(false)}
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, MutatePath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, req)

		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("response is not an AdmissionReview: %v\n%s", err, rec.Body.Bytes())
		}
		if out.Response == nil {
			t.Fatalf("AdmissionReview without a response: %s", rec.Body.Bytes())
		}
		if r := out.Response.Result; r != nil && r.Code == http.StatusInternalServerError {
			t.Fatalf("500 with a labeler that never fails: %s", r.Message)
		}
	})
}
