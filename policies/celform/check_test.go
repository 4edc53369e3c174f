package celform

import (
	"strings"
	"testing"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// TestCheckAsTheAPIServer: what the API server refuses in a
// ValidatingAdmissionPolicy is refused at apply too, naming the field: a
// variable named by a word CEL reserves, a message with a line break; and
// the message generated from a multi-line expression is on one line.
func TestCheckAsTheAPIServer(t *testing.T) {
	cases := map[string]struct {
		edit func(*policyv1.WorkloadPolicy)
		want string
	}{
		"a reserved word as a variable's name": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.CEL.Variables = []policyv1.CELVariable{{Name: "namespace", Expression: "request.namespace"}}
			},
			want: `spec.cel.variables[0].name: Invalid value: "namespace": is a word CEL reserves`,
		},
		"a message with a line break": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.CEL.Validations[0].Message = "too many\nGPUs"
			},
			want: `spec.cel.validations[0].message: Invalid value: "too many\nGPUs": must not contain line breaks`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := Check(maxGPUs(tc.edit), Keys{})
			if !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Errorf("Check: %v, want %s", errs, tc.want)
			}
		})
	}
	wp := maxGPUs(func(wp *policyv1.WorkloadPolicy) {
		wp.Spec.CEL.Validations[0] = policyv1.CELValidation{Expression: "variables.gpus <=\n    variables.parameters.max"}
	})
	if errs := Check(wp, Keys{}); len(errs) > 0 {
		t.Fatal(errs)
	}
	vap, _, err := Generate(wp, Keys{}, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := vap.Spec.Validations[0].Message, "[max-gpus] failed expression: variables.gpus <= variables.parameters.max"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
