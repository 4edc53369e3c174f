package webhook

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appendReview appends the answer AdmissionReview as encoding/json's
// Encoder writes it (a newline last), without reflection and with the
// patch base64-encoded straight into dst, for the answers the handlers
// give: a response whose status carries no details and no list metadata.
// It reports false, dst unchanged in length, for any other review, which
// the caller encodes with encoding/json. TestReviewAnswerAsEncodingJSON
// holds the two equal on random answers, and
// TestReviewHTTPAnswersAsAdmissionWebhook on every golden's.
func appendReview(dst []byte, ar *admissionv1.AdmissionReview) ([]byte, bool) {
	r := ar.Response
	if ar.Request != nil || r == nil || (r.Result != nil && (r.Result.Details != nil || r.Result.ListMeta != (metav1.ListMeta{}))) {
		return dst, false
	}
	o := newObject(dst)
	o.str("kind", ar.Kind, true)
	o.str("apiVersion", ar.APIVersion, true)
	o.name("response")
	ro := newObject(o.b)
	ro.str("uid", string(r.UID), false)
	ro.name("allowed")
	ro.b = strconv.AppendBool(ro.b, r.Allowed)
	if s := r.Result; s != nil {
		ro.name("status")
		so := newObject(ro.b)
		so.str("kind", s.Kind, true)
		so.str("apiVersion", s.APIVersion, true)
		so.name("metadata")
		so.b = append(so.b, '{', '}')
		so.str("status", s.Status, true)
		so.str("message", s.Message, true)
		so.str("reason", string(s.Reason), true)
		integer(&so, "code", s.Code, true)
		ro.b = so.end()
	}
	if len(r.Patch) > 0 {
		ro.name("patch")
		ro.b = append(ro.b, '"')
		ro.b = base64.StdEncoding.AppendEncode(ro.b, r.Patch)
		ro.b = append(ro.b, '"')
	}
	strPtr(&ro, "patchType", r.PatchType, true)
	if len(r.AuditAnnotations) > 0 {
		ro.name("auditAnnotations")
		ro.b = appendStringMap(ro.b, r.AuditAnnotations)
	}
	strs(&ro, "warnings", r.Warnings)
	o.b = ro.end()
	return append(o.end(), '\n'), true
}

// writeAppended writes the answer as appendReview encodes it, or reports
// false when appendReview does not take it.
func (h *reviewHTTP) writeAppended(w http.ResponseWriter, ar *admissionv1.AdmissionReview) bool {
	p := answers.Get().(*[]byte)
	b := (*p)[:0]
	if r := ar.Response; r != nil {
		// Room for the patch in base64 and the rest, so that the answer
		// is not grown step by step in a buffer the pool had lost.
		if need := base64.StdEncoding.EncodedLen(len(r.Patch)) + 1024; cap(b) < need {
			b = make([]byte, 0, need)
		}
	}
	b, ok := appendReview(b, ar)
	if ok {
		h.send(w, b)
	}
	if cap(b) <= maxPooledBuffer {
		*p = b[:0]
		answers.Put(p)
	}
	return ok
}

// answers are reused buffers for appendReview.
var answers = sync.Pool{New: func() any { return new([]byte) }}
