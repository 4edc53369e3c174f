package celpolicy

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCondition: CELReady follows the API server's type checking of the
// generated policy's current generation.
func TestCondition(t *testing.T) {
	vap := func(generation, observed int64, tc *admissionregistrationv1.TypeChecking) *admissionregistrationv1.ValidatingAdmissionPolicy {
		return &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "modelgate-p", Generation: generation},
			Status:     admissionregistrationv1.ValidatingAdmissionPolicyStatus{ObservedGeneration: observed, TypeChecking: tc},
		}
	}
	cases := map[string]struct {
		vap        *admissionregistrationv1.ValidatingAdmissionPolicy
		wantStatus metav1.ConditionStatus
		wantReason string
		wantInMsg  string
	}{
		"not type-checked yet": {vap: vap(1, 0, nil), wantStatus: metav1.ConditionUnknown, wantReason: ReasonChecking, wantInMsg: "not type-checked"},
		"an older generation checked": {vap: vap(2, 1, &admissionregistrationv1.TypeChecking{}),
			wantStatus: metav1.ConditionUnknown, wantReason: ReasonChecking},
		"checked, nothing found": {vap: vap(2, 2, &admissionregistrationv1.TypeChecking{}), wantStatus: metav1.ConditionTrue, wantReason: ReasonAccepted},
		"checked, warnings": {vap: vap(2, 2, &admissionregistrationv1.TypeChecking{ExpressionWarnings: []admissionregistrationv1.ExpressionWarning{
			{FieldRef: "spec.validations[0].expression", Warning: "undefined field 'replicaz'"},
		}}), wantStatus: metav1.ConditionFalse, wantReason: ReasonTypeCheckErrors, wantInMsg: "spec.validations[0].expression: undefined field 'replicaz'"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Condition(tc.vap, 7)
			if c.Type != ConditionCELReady || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.ObservedGeneration != 7 {
				t.Errorf("condition %+v, want %s %s of generation 7", c, tc.wantStatus, tc.wantReason)
			}
			if tc.wantInMsg != "" && !strings.Contains(c.Message, tc.wantInMsg) {
				t.Errorf("message %q does not say %q", c.Message, tc.wantInMsg)
			}
		})
	}
}
