package v1alpha1

import (
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EngineNames are the accepted keys of controller.engines: the values of
// an AIInference's spec.engine.name.
var EngineNames = []string{"vllm", "sglang", "tgi", "triton", "custom"}

// EnginePlaceholders are what an engine preset's command, args and env
// values may refer to.
var EnginePlaceholders = []string{"{{model}}", "{{port}}"}

var placeholder = regexp.MustCompile(`\{\{[^}]*\}\}`)

// validateController checks the AIInference controller's settings.
func validateController(c *Controller, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Subdomain(c.ServiceAccountName); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("serviceAccountName"), c.ServiceAccountName, msgs[0]))
	}
	names := make([]string, 0, len(c.Engines))
	for name := range c.Engines {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e, ep := c.Engines[name], p.Child("engines").Key(name)
		if !slices.Contains(EngineNames, name) {
			errs = append(errs, field.NotSupported(p.Child("engines"), name, EngineNames))
			continue
		}
		if strings.TrimSpace(e.Image) == "" || strings.ContainsAny(e.Image, " \t\n") {
			errs = append(errs, field.Invalid(ep.Child("image"), e.Image, "must be an image reference without spaces"))
		}
		errs = append(errs, validatePlaceholders(ep.Child("command"), e.Command)...)
		errs = append(errs, validatePlaceholders(ep.Child("args"), e.Args)...)
		for i, v := range e.Env {
			if msgs := validation.IsEnvVarName(v.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(ep.Child("env").Index(i).Child("name"), v.Name, msgs[0]))
			}
			errs = append(errs, validatePlaceholders(ep.Child("env").Index(i).Child("value"), []string{v.Value})...)
		}
	}
	return errs
}

// validatePlaceholders rejects a {{...}} that is not one of
// EnginePlaceholders: a misspelt one would reach the engine as it is.
func validatePlaceholders(p *field.Path, values []string) field.ErrorList {
	var errs field.ErrorList
	for i, v := range values {
		for _, ph := range placeholder.FindAllString(v, -1) {
			if !slices.Contains(EnginePlaceholders, ph) {
				errs = append(errs, field.Invalid(p.Index(i), v, "may use only the placeholders "+strings.Join(EnginePlaceholders, " and ")))
			}
		}
	}
	return errs
}
