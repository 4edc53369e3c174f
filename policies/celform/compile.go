package celform

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// Compatibility is the Kubernetes CEL environment a CEL form is compiled in
// when it is applied: an API server accepts in a new policy what its
// default compatibility version (its own minor version less one) offers, so
// what compiles here Kubernetes 1.35 and later accept. modelgate's own
// variables need 1.34's CEL (two-variable comprehensions, flatten, sort).
var Compatibility = version.MajorMinor(1, 34)

// compileOptions are the variables a validation may read, as the API server
// declares them for a policy without parameters.
var compileOptions = plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}

// messageOptions are those a message expression may read: no authorizer.
var messageOptions = plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: false}

// celReserved are the words CEL reserves, which the API server refuses as
// a variable's name (its validation of ValidatingAdmissionPolicies).
var celReserved = []string{
	"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
	"if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
}

// Check compiles wp's CEL form with modelgate's variables as the API server
// compiles a new ValidatingAdmissionPolicy, and lists every problem at the
// field path of the expression at fault. A policy without a CEL form has
// none.
func Check(wp *policyv1.WorkloadPolicy, k Keys) field.ErrorList {
	form := wp.Spec.CEL
	if form == nil {
		return nil
	}
	path := field.NewPath("spec", "cel")
	var errs field.ErrorList
	names := slices.Clone(reservedNames)
	for _, v := range form.Variables {
		names = append(names, v.Name)
	}
	for i, v := range form.Variables {
		switch {
		case slices.Contains(celReserved, v.Name):
			errs = append(errs, field.Invalid(path.Child("variables").Index(i).Child("name"), v.Name,
				fmt.Sprintf("is a word CEL reserves (%s), which the API server refuses as a variable's name: choose another name", strings.Join(celReserved, ", "))))
		case slices.Contains(reservedNames, v.Name):
			errs = append(errs, field.Invalid(path.Child("variables").Index(i).Child("name"), v.Name,
				fmt.Sprintf("is one of modelgate's variables (%v): choose another name", reservedNames)))
		case strings.HasPrefix(v.Name, OldPrefix) && slices.Contains(names, strings.TrimPrefix(v.Name, OldPrefix)):
			errs = append(errs, field.Invalid(path.Child("variables").Index(i).Child("name"), v.Name,
				fmt.Sprintf("is the name of the copy of variables.%s that modelgate reads on the old object of an UPDATE (ratcheting): choose another name",
					strings.TrimPrefix(v.Name, OldPrefix))))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	g, err := generate(wp, k, Scope{})
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "parameters"), "", err.Error())}
	}
	vap := g.vap
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(Compatibility))
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	end := g.own + len(form.Variables)
	for i, v := range vap.Spec.Variables {
		res := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, compileOptions, environment.NewExpressions)
		switch {
		case res.Error == nil:
		case i < g.own:
			// modelgate's own variables compile; only the parameters can
			// make one fail.
			errs = append(errs, field.Invalid(field.NewPath("spec", "parameters"), "", fmt.Sprintf("variables.%s does not compile: %s", v.Name, res.Error.Detail)))
		case i < end:
			errs = append(errs, field.Invalid(path.Child("variables").Index(i-g.own).Child("expression"), v.Expression, res.Error.Detail))
		case len(errs) == 0:
			// A copy read on the old object compiles as what it copies.
			errs = append(errs, field.InternalError(path.Child("variables"), fmt.Errorf("variables.%s, generated to ratchet updates, does not compile "+
				"(set spec.ratchet: false to do without): %s", v.Name, res.Error.Detail)))
		}
	}
	for i, v := range form.Validations {
		p := path.Child("validations").Index(i)
		if strings.ContainsAny(v.Message, "\r\n") {
			errs = append(errs, field.Invalid(p.Child("message"), v.Message,
				"must not contain line breaks (the API server refuses them): write it on one line, or compute it with messageExpression"))
		}
		res := c.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, compileOptions, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, field.Invalid(p.Child("expression"), v.Expression, res.Error.Detail))
		}
		if v.MessageExpression == "" {
			continue
		}
		res = c.CompileCELExpression(&validating.MessageExpressionCondition{MessageExpression: vap.Spec.Validations[i].MessageExpression}, messageOptions, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, field.Invalid(p.Child("messageExpression"), v.MessageExpression, res.Error.Detail))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	// What the form's own expressions are generated into (excepted,
	// ratcheted) compiles where they do.
	for i, v := range vap.Spec.Validations {
		res := c.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, compileOptions, environment.NewExpressions)
		if res.Error != nil {
			errs = append(errs, field.InternalError(path.Child("validations").Index(i).Child("expression"),
				fmt.Errorf("the generated expression does not compile (set spec.ratchet: false to do without ratcheting): %s", res.Error.Detail)))
		}
	}
	return errs
}

// compilePolicy compiles a ValidatingAdmissionPolicy for evaluation as the
// API server's admission plugin does (k8s.io/apiserver's compilePolicy,
// which it does not export): variables, match conditions, validations and
// message expressions, in the environment of stored expressions.
func compilePolicy(vap *admissionregistrationv1.ValidatingAdmissionPolicy) (validating.Validator, error) {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, fmt.Errorf("creating the CEL compiler: %w", err)
	}
	vars := make([]plugincel.NamedExpressionAccessor, len(vap.Spec.Variables))
	for i, v := range vap.Spec.Variables {
		vars[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	c.CompileAndStoreVariables(vars, compileOptions, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	if len(vap.Spec.MatchConditions) > 0 {
		conds := make([]plugincel.ExpressionAccessor, len(vap.Spec.MatchConditions))
		for i := range vap.Spec.MatchConditions {
			conds[i] = (*matchconditions.MatchCondition)(&vap.Spec.MatchConditions[i])
		}
		matcher = matchconditions.NewMatcher(c.CompileCondition(conds, compileOptions, environment.StoredExpressions),
			vap.Spec.FailurePolicy, "policy", "validate", vap.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(vap.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(vap.Spec.Validations))
	for i, v := range vap.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	return validating.NewValidator(
		c.CompileCondition(validations, compileOptions, environment.StoredExpressions),
		matcher,
		c.CompileCondition(nil, compileOptions, environment.StoredExpressions),
		c.CompileCondition(messages, messageOptions, environment.StoredExpressions),
		vap.Spec.FailurePolicy,
		nil,
	), nil
}
