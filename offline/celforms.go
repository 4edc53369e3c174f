package offline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
)

// CELForms are the CEL forms of the WorkloadPolicies of a policy path, to
// be judged as the API server judges the ValidatingAdmissionPolicies
// modelgate applies: each generated with the WorkloadPolicyExceptions in
// force that name its policy (celform.Scope.Exceptions), compiled once for
// each set of them.
type CELForms struct {
	keys  celform.Keys
	scope celform.Scope
	forms []*celForm
}

// celForm is one WorkloadPolicy's CEL form, where it was defined, and its
// policies compiled, by the exceptions that name it (exceptionsKey).
type celForm struct {
	wp       *policyv1.WorkloadPolicy
	where    string
	compiled map[string]*celform.Policy
}

// ErrCELForms is the error of LoadPoliciesWithCEL when the policies load
// but a CEL form cannot be generated or compiled for the Configuration.
var ErrCELForms = errors.New("the policies' CEL forms do not compile")

// LoadPoliciesWithCEL loads the policies at path as LoadPolicies does, and
// the CEL forms of its WorkloadPolicies (a policy directory of .rego files
// has none), reading and compiling each file once. Each form is compiled
// without exceptions, so that one that does not compile is told now; cfg
// gives the GPU keys and the webhooks' excluded namespaces. The error is
// LoadPolicies', or one that wraps ErrCELForms.
func LoadPoliciesWithCEL(ctx context.Context, path string, cfg *config.Configuration) ([]*policies.Compiled, *CELForms, error) {
	cs, loaded, err := loadPolicies(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	f := &CELForms{keys: celform.KeysOf(cfg), scope: celform.ScopeOf(cfg)}
	for _, l := range loaded {
		if l.wp.Spec.CEL == nil {
			continue
		}
		form := &celForm{wp: l.wp, where: l.where, compiled: map[string]*celform.Policy{}}
		if _, err := f.compile(form, nil); err != nil {
			return nil, nil, fmt.Errorf("%w:\n%w", ErrCELForms, err)
		}
		f.forms = append(f.forms, form)
	}
	return cs, f, nil
}

// Len is the number of CEL forms; a nil CELForms has none.
func (f *CELForms) Len() int {
	if f == nil {
		return 0
	}
	return len(f.forms)
}

// Policies are the forms' policies as generated with the exceptions in
// force es, in the order of the forms.
func (f *CELForms) Policies(es []policyv1.WorkloadPolicyException) ([]*celform.Policy, error) {
	if f == nil {
		return nil, nil
	}
	out := make([]*celform.Policy, 0, len(f.forms))
	for _, form := range f.forms {
		p, err := f.compile(form, celform.ExceptionsFor(form.wp.Name, es))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// compile is form's policy generated with es, the exceptions that name it:
// compiled the first time that set is seen.
func (f *CELForms) compile(form *celForm, es []policyv1.WorkloadPolicyException) (*celform.Policy, error) {
	key, err := exceptionsKey(es)
	if err != nil {
		return nil, err
	}
	if p, ok := form.compiled[key]; ok {
		return p, nil
	}
	scope := f.scope
	scope.Exceptions = es
	vap, binding, err := celform.Generate(form.wp, f.keys, scope)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", form.where, err)
	}
	p, err := celform.Compile(vap, binding)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", form.where, err)
	}
	form.compiled[key] = p
	return p, nil
}

// exceptionsKey identifies a sorted set of exceptions: what of them the
// generated policy reads.
func exceptionsKey(es []policyv1.WorkloadPolicyException) (string, error) {
	if len(es) == 0 {
		return "", nil
	}
	type keyed struct {
		Namespace, Name string
		Spec            policyv1.WorkloadPolicyExceptionSpec
	}
	ks := make([]keyed, len(es))
	for i := range es {
		ks[i] = keyed{Namespace: es[i].Namespace, Name: es[i].Name, Spec: es[i].Spec}
	}
	b, err := json.Marshal(ks)
	if err != nil {
		return "", fmt.Errorf("the exceptions of a CEL form: %w", err)
	}
	return string(b), nil
}
