package validators

import (
	"context"
	"errors"
	"fmt"
	"math"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
)

// SourceWorkloadPolicy names the policies that come from WorkloadPolicy
// resources in the policy store.
const SourceWorkloadPolicy = "WorkloadPolicy"

// CompileWorkloadPolicy compiles a WorkloadPolicy into the engine's form.
// A Rego problem gives a *policies.CompileError; bad parameters or match
// settings give a plain error naming the field.
func CompileWorkloadPolicy(ctx context.Context, wp *policyv1.WorkloadPolicy) (*policies.Compiled, error) {
	params, err := wp.Parameters()
	if err != nil {
		return nil, err
	}
	m := wp.Spec.Match
	c, err := policies.Compile(ctx, policies.Policy{
		Name:          wp.Name,
		Source:        SourceWorkloadPolicy,
		Filename:      wp.Name + ".rego",
		Module:        wp.Spec.Rego,
		Action:        policies.Action(wp.Spec.EnforcementAction),
		FailurePolicy: policies.FailurePolicy(wp.Spec.FailurePolicy),
		NoRatchet:     wp.Spec.Ratchet != nil && !*wp.Spec.Ratchet,
		Parameters:    params,
		Match: policies.Match{
			Kinds:              m.Kinds,
			Namespaces:         m.Namespaces,
			ExcludedNamespaces: m.ExcludedNamespaces,
			NamespaceSelector:  m.NamespaceSelector,
		},
	})
	if err != nil {
		if ce, ok := errors.AsType[*policies.CompileError](err); ok {
			return nil, ce
		}
		return nil, fmt.Errorf("spec: %w", err)
	}
	return c, nil
}

// PolicyErrors are a compile error's problems as the status reports them.
func PolicyErrors(ce *policies.CompileError) []policyv1.PolicyError {
	out := make([]policyv1.PolicyError, 0, len(ce.Problems))
	for _, p := range ce.Problems {
		out = append(out, policyv1.PolicyError{
			Line:    clampInt32(p.Row),
			Column:  clampInt32(p.Col),
			Message: p.Code + ": " + p.Message,
		})
	}
	return out
}

func clampInt32(n int) int32 {
	return int32(max(0, min(n, math.MaxInt32)))
}
