package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/webhook/decode"
)

// reviewHTTP serves AdmissionReviews to an admission.Handler, as
// controller-runtime's admission.Webhook does, for less: it decodes the
// review once, in one pass (encoding/json/v2's decoder, case-sensitive as
// the API server's; see unmarshal), straight into the v1 type (v1beta1
// has the same shape), where the generic
// decoder reads the whole body a first time just to find its apiVersion
// and kind; it uses the body the request limits already read (limits.go)
// instead of copying it; and it gives the handler the base logger, to
// which a handler adds the request's fields when it logs, instead of a
// logger with six fields built for every review. The answers are the
// same, byte for byte (TestReviewHTTPAnswersAsAdmissionWebhook).
type reviewHTTP struct {
	handler admission.Handler
	log     logr.Logger
}

// newReviewHTTP serves h, logging as controller-runtime's "admission".
func newReviewHTTP(h admission.Handler) *reviewHTTP {
	return &reviewHTTP{handler: h, log: logf.Log.WithName("admission")}
}

var _ http.Handler = (*reviewHTTP)(nil)

// maxReviewBytes is controller-runtime's bound on a review body, for a
// request that did not come through the limits.
const maxReviewBytes = 7 << 20

// admissionGroupVersions are the AdmissionReview versions served.
var admissionGroupVersions = []string{"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}

// envelope is an AdmissionReview as it arrives.
type envelope struct {
	metav1.TypeMeta `json:",inline"`
	Request         *admissionv1.AdmissionRequest `json:"request,omitempty"`
}

// rawInBody decodes the review's object and old object as the bytes of the
// body itself, not copies: the body outlives the review, and nothing
// writes to either (TestObjectInBody checks the decoder hands out slices of
// its input). The capacity is cut at the value's end, so an append copies.
// A null leaves Raw empty, as RawExtension's own UnmarshalJSON does.
var rawInBody = jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, re *runtime.RawExtension) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if v.Kind() != 'n' {
		re.Raw = v[:len(v):len(v)]
	}
	return nil
}))

// ServeHTTP implements http.Handler.
func (h *reviewHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := reviewBody(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		h.fail(w, fmt.Errorf("contentType=%s, expected application/json", ct))
		return
	}
	var ar envelope
	if err := jsonv2.Unmarshal(body, &ar, rawInBody); err != nil {
		h.fail(w, fmt.Errorf("decoding the AdmissionReview: %w", decode.SteadyError(err)))
		return
	}
	if ar.APIVersion == "" && ar.Kind == "" {
		// controller-runtime reads a review that names no type as v1.
		ar.APIVersion, ar.Kind = admissionGroupVersions[0], "AdmissionReview"
	}
	if ar.Kind != "AdmissionReview" || (ar.APIVersion != admissionGroupVersions[0] && ar.APIVersion != admissionGroupVersions[1]) {
		h.fail(w, fmt.Errorf("apiVersion %q, kind %q: expected an AdmissionReview of %v", ar.APIVersion, ar.Kind, admissionGroupVersions))
		return
	}
	req := admission.Request{}
	if ar.Request != nil {
		req.AdmissionRequest = *ar.Request
	}
	resp := h.handle(r.Context(), req)
	h.write(w, admissionv1.AdmissionReview{TypeMeta: ar.TypeMeta, Response: &resp.AdmissionResponse})
}

// reviewBody is the request's body: the bytes the limits read, or read
// here, as controller-runtime bounds it.
func reviewBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, errors.New("request body is empty")
	}
	if b, ok := r.Body.(*readBody); ok {
		return b.data, nil
	}
	defer r.Body.Close()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxReviewBytes {
		return nil, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewBytes)
	}
	return body, nil
}

// handle calls the handler as admission.Webhook.Handle does: a panic is a
// 500, and the response is completed (UID, status code, the patch
// encoded).
func (h *reviewHTTP) handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if p := recover(); p != nil {
			for _, fn := range utilruntime.PanicHandlers {
				fn(ctx, p)
			}
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", p))
			resp.UID = req.UID
		}
	}()
	ctx = admission.NewContextWithRequest(logf.IntoContext(ctx, h.log), req)
	resp = h.handler.Handle(ctx, req)
	if err := resp.Complete(req); err != nil {
		h.log.Error(err, "unable to encode response", "requestID", req.UID)
		resp = admission.Errored(http.StatusInternalServerError, errors.New("unable to encode response"))
		resp.UID = req.UID
	}
	return resp
}

// fail answers a review that cannot be read: 400 in an AdmissionReview
// with no version, as controller-runtime answers it.
func (h *reviewHTTP) fail(w http.ResponseWriter, err error) {
	h.log.Error(err, "bad request")
	resp := admission.Errored(http.StatusBadRequest, err)
	h.write(w, admissionv1.AdmissionReview{Response: &resp.AdmissionResponse})
}

// write encodes the answer: by appendReview where it can, else by
// encoding/json.
func (h *reviewHTTP) write(w http.ResponseWriter, ar admissionv1.AdmissionReview) {
	if h.writeAppended(w, &ar) {
		return
	}
	buf := buffers.Get().(*bytes.Buffer)
	defer putBuffer(buf)
	if err := json.NewEncoder(buf).Encode(ar); err != nil {
		h.log.Error(err, "unable to encode the response")
		http.Error(w, "unable to encode the response", http.StatusInternalServerError)
		return
	}
	h.send(w, buf.Bytes())
}

// send writes the encoded answer.
func (h *reviewHTTP) send(w http.ResponseWriter, b []byte) {
	if _, err := w.Write(b); err != nil {
		h.log.V(1).Info("unable to write the response", "error", err.Error())
	}
}
