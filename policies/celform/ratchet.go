package celform

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// OldPrefix starts the name of the copy of a variable read on the old
// object (old_gpus for gpus): a CEL form's own variables may not take the
// name of such a copy.
const OldPrefix = "old_"

// ratchets reports whether the generated policy ratchets updates as
// modelgate does the policy's Rego (policies.Decision.Ratchet): a denying
// policy (Rego ratchets deny messages only) whose spec.ratchet is not
// false.
func ratchets(wp *policyv1.WorkloadPolicy) bool {
	return denies(wp) && (wp.Spec.Ratchet == nil || *wp.Spec.Ratchet)
}

// denies reports whether the policy's violations deny (enforcementAction
// deny, the default): only those are ratcheted and excepted.
func denies(wp *policyv1.WorkloadPolicy) bool {
	a := wp.Spec.EnforcementAction
	return a != policyv1.EnforcementActionWarn && a != policyv1.EnforcementActionDryRun
}

// oldSide builds the expressions of a policy's validations read on the old
// object of an UPDATE: the variables they depend on are read again on
// oldObject, as copies named OldPrefix+name added after the others (a
// policy's variables are evaluated when first read, so on a CREATE, or an
// UPDATE that violates nothing, the copies cost nothing).
type oldSide struct {
	// vars are the variables that may be copied, in order: modelgate's
	// and the form's own (not inScope and excepted, which judge the
	// request, not an object).
	vars []admissionregistrationv1.Variable
	// parsed is each variable's parse, nil where it does not parse.
	parsed map[string]*parsed
	// onObject are the variables that read the object, directly or
	// through another: those copied.
	onObject map[string]bool
	// broken are those whose copy cannot be built (they do not parse, or
	// read variables other than by name), or depend on one that is.
	broken map[string]bool
	rename map[string]string
	// used are the copies the validations read.
	used map[string]bool
}

func newOldSide(vars []admissionregistrationv1.Variable) *oldSide {
	o := &oldSide{vars: vars, parsed: map[string]*parsed{}, onObject: map[string]bool{}, broken: map[string]bool{},
		rename: map[string]string{}, used: map[string]bool{}}
	for _, v := range vars {
		p, err := parse(v.Expression)
		if err != nil {
			o.broken[v.Name] = true
			continue
		}
		o.parsed[v.Name] = p
		o.onObject[v.Name] = p.readsObject()
		for _, r := range p.reads {
			o.onObject[v.Name] = o.onObject[v.Name] || o.onObject[r]
			o.broken[v.Name] = o.broken[v.Name] || o.broken[r]
		}
		if o.onObject[v.Name] {
			o.rename[v.Name] = OldPrefix + v.Name
		}
	}
	return o
}

// use marks the copies p reads, and those they read; false when one of
// them cannot be built.
func (o *oldSide) use(p *parsed) bool {
	for _, r := range p.reads {
		if o.broken[r] {
			return false
		}
		if !o.onObject[r] || o.used[r] {
			continue
		}
		o.used[r] = true
		if !o.use(o.parsed[r]) {
			return false
		}
	}
	return true
}

// on is expr read on the old object, and whether it could be built.
func (o *oldSide) on(expr string) (string, bool) {
	p, err := parse(expr)
	if err != nil || !o.use(p) {
		return "", false
	}
	out, err := p.onOld(o.rename)
	return out, err == nil
}

// copies are the variables read on the old object that the validations
// use, in the order of the variables they copy. A copy that cannot be
// printed leaves ok false.
func (o *oldSide) copies() (out []admissionregistrationv1.Variable, ok bool) {
	for _, v := range o.vars {
		if !o.used[v.Name] {
			continue
		}
		p, err := parse(v.Expression) // o.parsed[v.Name] is kept unchanged for use
		if err != nil {
			return nil, false
		}
		expr, err := p.onOld(o.rename)
		if err != nil {
			return nil, false
		}
		out = append(out, admissionregistrationv1.Variable{Name: o.rename[v.Name], Expression: expr})
	}
	return out, true
}

// ratchetClause is what lifts a validation's violation on an UPDATE: the
// old object violated it too (its expression, with every variable it
// reads, false on oldObject) with the same message (that of its
// messageExpression, when it has one, the same on both). "" when it cannot
// be built: the validation then judges an UPDATE as a CREATE.
func (o *oldSide) ratchetClause(v policyv1.CELValidation) string {
	e, ok := o.on(v.Expression)
	if !ok {
		return ""
	}
	clause := `request.operation == 'UPDATE' && oldObject != null && !(` + e + `)`
	if v.MessageExpression != "" {
		m, ok := o.on(v.MessageExpression)
		if !ok {
			return ""
		}
		clause += ` && (` + v.MessageExpression + `) == (` + m + `)`
	}
	return clause
}
