package webhook

import (
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// invalid answers a malformed object (422): every problem at once, each
// naming the field, the bad value and what is accepted.
func invalid(gk schema.GroupKind, name string, errs field.ErrorList) admission.Response {
	st := apierrors.NewInvalid(gk, name, errs).ErrStatus
	return deny(&st)
}

// warningSource tags modelgate's own admission warnings (about what it
// injected), as a policy's name tags the policy's.
const warningSource = "modelgate"

// tagged is a warning in the form "[source] message", on one line: a
// warning is an HTTP header, which the API server drops when it spans
// several.
func tagged(source, msg string) string {
	return "[" + source + "] " + strings.Join(strings.Fields(msg), " ")
}

// forbidden answers an object that breaks a rule (403), one line per
// violation in the form "[rule] message".
func forbidden(rule string, errs field.ErrorList) admission.Response {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = "[" + rule + "] " + e.Error()
	}
	return deny(&metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: strings.Join(lines, "\n"),
	})
}

func deny(st *metav1.Status) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: st}}
}
