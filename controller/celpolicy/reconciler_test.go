package celpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
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

// TestInForce: the generated policy holds the exceptions that name the
// WorkloadPolicy, until the clock skew before their expiry, and is made
// again when the first of them stops applying.
func TestInForce(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ex := func(name string, expires time.Duration, edit func(*policyv1.WorkloadPolicyException)) policyv1.WorkloadPolicyException {
		e := policyv1.WorkloadPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
		e.Spec.Policies = []string{"max-gpus"}
		e.Spec.ExpiresAt = metav1.NewTime(now.Add(expires))
		if edit != nil {
			edit(&e)
		}
		return e
	}
	cases := map[string]struct {
		es           []policyv1.WorkloadPolicyException
		skew         time.Duration
		wantIn       []string
		wantNext     time.Duration
		wantUnusable []string
	}{
		"none": {},
		"the first to expire decides when to look again": {es: []policyv1.WorkloadPolicyException{ex("b", 2*time.Hour, nil), ex("a", time.Hour, nil)},
			wantIn: []string{"a", "b"}, wantNext: time.Hour},
		"the clock skew before expiresAt": {es: []policyv1.WorkloadPolicyException{ex("a", time.Hour, nil)}, skew: time.Minute,
			wantIn: []string{"a"}, wantNext: 59 * time.Minute},
		"within the clock skew of its expiry: no longer in force": {es: []policyv1.WorkloadPolicyException{ex("a", 30*time.Second, nil)}, skew: time.Minute},
		"expired": {es: []policyv1.WorkloadPolicyException{ex("a", -time.Second, nil)}},
		"another policy's, or the policy directory's": {es: []policyv1.WorkloadPolicyException{
			ex("other", time.Hour, func(e *policyv1.WorkloadPolicyException) { e.Spec.Policies = []string{"other"} }),
			ex("dir", time.Hour, func(e *policyv1.WorkloadPolicyException) { e.Spec.PolicySource = policyv1.PolicySourceDirectory }),
		}},
		"a selector that does not parse applies nowhere": {es: []policyv1.WorkloadPolicyException{ex("bad", time.Hour, func(e *policyv1.WorkloadPolicyException) {
			e.Spec.Match.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		})}, wantUnusable: []string{"bad"}},
	}
	names := func(es []policyv1.WorkloadPolicyException) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Name)
		}
		return out
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in, next, unusable := InForce(tc.es, "max-gpus", tc.skew, now)
			if diff := cmp.Diff(tc.wantIn, names(in)); diff != "" {
				t.Errorf("in force (-want +got):\n%s", diff)
			}
			if next != tc.wantNext {
				t.Errorf("next %s, want %s", next, tc.wantNext)
			}
			if diff := cmp.Diff(tc.wantUnusable, names(unusable)); diff != "" {
				t.Errorf("unusable (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPoliciesNamed: a change to an exception regenerates the policies it
// names, of the WorkloadPolicy source only.
func TestPoliciesNamed(t *testing.T) {
	ex := &policyv1.WorkloadPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "e"}}
	ex.Spec.Policies = []string{"a", "b"}
	var got []string
	for _, r := range policiesNamed(context.Background(), ex) {
		got = append(got, r.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	ex.Spec.PolicySource = policyv1.PolicySourceDirectory
	if got := policiesNamed(context.Background(), ex); len(got) != 0 {
		t.Errorf("a Directory exception regenerates %v", got)
	}
}
