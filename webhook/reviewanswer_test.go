package webhook

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"
)

// TestReviewAnswerAsEncodingJSON: appendReview writes what encoding/json's
// Encoder writes for random answers (random strings, patches, warnings,
// audit annotations, statuses), takes every answer whose status carries
// no details or list metadata, and refuses the others.
func TestReviewAnswerAsEncodingJSON(t *testing.T) {
	f := patchValueFiller(7).Funcs(func(r *admissionv1.AdmissionRequest, _ randfill.Continue) { *r = admissionv1.AdmissionRequest{} })
	taken := 0
	for i := range 2000 {
		var ar admissionv1.AdmissionReview
		f.Fill(&ar)
		ar.Request = nil
		if i%2 == 0 && ar.Response != nil && ar.Response.Result != nil {
			ar.Response.Result.Details, ar.Response.Result.ListMeta = nil, metav1.ListMeta{}
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(ar); err != nil {
			t.Fatal(err)
		}
		got, ok := appendReview([]byte("prefix"), &ar)
		if !ok {
			if r := ar.Response; r != nil && (r.Result == nil || (r.Result.Details == nil && r.Result.ListMeta == (metav1.ListMeta{}))) {
				t.Fatalf("appendReview refuses %s", want.Bytes())
			}
			if string(got) != "prefix" {
				t.Fatalf("refusing, appendReview changed the buffer: %q", got)
			}
			continue
		}
		taken++
		if !bytes.Equal(got[len("prefix"):], want.Bytes()) {
			t.Fatalf("appendReview:\n got %s\nwant %s", got[len("prefix"):], want.Bytes())
		}
	}
	if taken < 500 {
		t.Errorf("appendReview took %d of 2000 answers: too few to tell", taken)
	}
}

// TestReviewAnswerFieldsKnown fails when the answer's types gain a field
// (a newer k8s.io/api or apimachinery) appendReview does not write.
func TestReviewAnswerFieldsKnown(t *testing.T) {
	for typ, fields := range map[reflect.Type]string{
		reflect.TypeFor[admissionv1.AdmissionReview]():   "TypeMeta Request Response",
		reflect.TypeFor[admissionv1.AdmissionResponse](): "UID Allowed Result Patch PatchType AuditAnnotations Warnings",
		reflect.TypeFor[metav1.Status]():                 "TypeMeta ListMeta Status Message Reason Details Code",
		reflect.TypeFor[metav1.TypeMeta]():               "Kind APIVersion",
	} {
		checkFieldsKnown(t, typ, fields, "appendReview")
	}
}
