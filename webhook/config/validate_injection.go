package config

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
)

// pullPolicies are the accepted injection.loader.pullPolicy values.
var pullPolicies = []string{string(corev1.PullAlways), string(corev1.PullIfNotPresent), string(corev1.PullNever)}

// loaderSchemes are the schemes a loader can be configured for (a pvc://
// model is mounted directly and has no loader).
var loaderSchemes = []string{"s3", "gs", "hf", "https", "oci"}

// validateInjection checks the loader, GPU, probe and profile settings.
func validateInjection(in *Injection, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	lp := p.Child("loader")
	if strings.TrimSpace(in.Loader.Image) == "" {
		errs = append(errs, field.Required(lp.Child("image"), "the loader needs an image"))
	}
	if !slices.Contains(pullPolicies, string(in.Loader.PullPolicy)) {
		errs = append(errs, field.NotSupported(lp.Child("pullPolicy"), in.Loader.PullPolicy, pullPolicies))
	}
	for scheme, img := range in.Loader.Schemes {
		sp := lp.Child("schemes").Key(scheme)
		if !slices.Contains(loaderSchemes, scheme) {
			errs = append(errs, field.NotSupported(sp, scheme, loaderSchemes))
		}
		if strings.TrimSpace(img.Image) == "" {
			errs = append(errs, field.Required(sp.Child("image"), "the loader needs an image"))
		}
	}

	gp := p.Child("gpu")
	for name, v := range map[string]string{
		"resourceName": in.GPU.ResourceName, "productLabel": in.GPU.ProductLabel,
		"memoryLabel": in.GPU.MemoryLabel, "taintKey": in.GPU.TaintKey,
	} {
		if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(gp.Child(name), v, strings.Join(msgs, "; ")))
		}
	}

	pp := p.Child("probes")
	if in.Probes.PeriodSeconds < 1 || in.Probes.PeriodSeconds > 60 {
		errs = append(errs, field.Invalid(pp.Child("periodSeconds"), in.Probes.PeriodSeconds, "must be between 1 and 60"))
	}
	engines := []string{"vllm", "sglang", "tgi", "triton"}
	for engine, preset := range in.Probes.Presets {
		ep := pp.Child("presets").Key(engine)
		if !slices.Contains(engines, engine) {
			errs = append(errs, field.NotSupported(ep, engine, engines))
		}
		if msgs := validation.IsValidPortNum(int(preset.Port)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(ep.Child("port"), preset.Port, msgs[0]))
		}
		if !strings.HasPrefix(preset.Path, "/") {
			errs = append(errs, field.Invalid(ep.Child("path"), preset.Path, `must start with "/"`))
		}
	}

	parser := annotations.Parser{Profiles: in.Profiles}
	for name, values := range in.Profiles {
		// ValidateProfile checks the name and every value.
		errs = append(errs, parser.ValidateProfile(name, values, p.Child("profiles").Key(name))...)
	}
	return errs
}
