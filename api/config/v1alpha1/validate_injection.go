package v1alpha1

import (
	"maps"
	"path"
	"regexp"
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
	errs = append(errs, validateLoaderArgs(in.Loader.Args, lp.Child("args"))...)
	errs = append(errs, validateLoaderEnv(in.Loader.Env, lp.Child("env"))...)
	for _, scheme := range slices.Sorted(maps.Keys(in.Loader.Schemes)) {
		img := in.Loader.Schemes[scheme]
		sp := lp.Child("schemes").Key(scheme)
		if !slices.Contains(loaderSchemes, scheme) {
			errs = append(errs, field.NotSupported(sp, scheme, loaderSchemes))
		}
		if strings.TrimSpace(img.Image) == "" {
			errs = append(errs, field.Required(sp.Child("image"), "the loader needs an image"))
		}
		errs = append(errs, validateLoaderArgs(img.Args, sp.Child("args"))...)
	}

	errs = append(errs, validateImageVolumes(&in.ImageVolumes, p.Child("imageVolumes"))...)

	gp := p.Child("gpu")
	for name, v := range map[string]string{
		"resourceName": in.GPU.ResourceName, "productLabel": in.GPU.ProductLabel,
		"memoryLabel": in.GPU.MemoryLabel, "taintKey": in.GPU.TaintKey,
	} {
		if msgs := validation.IsQualifiedName(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(gp.Child(name), v, strings.Join(msgs, "; ")))
		}
	}

	errs = append(errs, validateGPUAllocation(&in.GPU, gp)...)

	pp := p.Child("probes")
	if in.Probes.PeriodSeconds < 1 || in.Probes.PeriodSeconds > 60 {
		errs = append(errs, field.Invalid(pp.Child("periodSeconds"), in.Probes.PeriodSeconds, "must be between 1 and 60"))
	}
	engines := []string{"vllm", "sglang", "tgi", "triton", "dynamo"}
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

// validateLoaderArgs checks a loader's args template, when set: only the
// placeholders {{uri}} and {{dest}}, and {{uri}} somewhere.
func validateLoaderArgs(args []string, p *field.Path) field.ErrorList {
	if args == nil {
		return nil
	}
	i, err := CheckLoaderArgs(args)
	switch {
	case err == nil:
		return nil
	case i < 0:
		return field.ErrorList{field.Invalid(p, args, err.Error())}
	default:
		return field.ErrorList{field.Invalid(p.Index(i), args[i], err.Error())}
	}
}

// credentialVars are the variables modelgate's loader reads credentials
// from (the loader packages' names, and the aliases a Secret's keys take,
// see loader/s3), which injection.loader.env refuses: its values are
// written into every Pod spec.
var credentialVars = []string{
	"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
	"aws_access_key_id", "aws_secret_access_key", "aws_session_token",
	"access_key_id", "secret_access_key", "session_token",
	"accessKey", "secretKey", "sessionToken", "accesskey", "secretkey",
	"GOOGLE_APPLICATION_CREDENTIALS_JSON", "OCI_PASSWORD", "OCI_TOKEN",
}

// validateLoaderEnv checks the loaders' environment: valid names, each
// once, neither the variable modelgate sets itself nor a credential.
func validateLoaderEnv(env []EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, v := range env {
		np := p.Index(i).Child("name")
		switch {
		case len(validation.IsEnvVarName(v.Name)) > 0:
			errs = append(errs, field.Invalid(np, v.Name, validation.IsEnvVarName(v.Name)[0]))
		case seen[v.Name]:
			errs = append(errs, field.Duplicate(np, v.Name))
		case v.Name == LoaderPodUIDEnv:
			errs = append(errs, field.Forbidden(np, "modelgate sets "+v.Name+" itself"))
		case slices.Contains(credentialVars, v.Name):
			errs = append(errs, field.Forbidden(np, v.Name+" is a credential and would be written into every Pod spec: "+
				"put it in the Secret that "+annotations.ModelCredentials+" names"))
		}
		seen[v.Name] = true
	}
	return errs
}

// validateGPUAllocation checks the allocation and the DRA names.
func validateGPUAllocation(g *GPU, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := annotations.ParseGPUAllocation(g.Allocation); err != nil {
		errs = append(errs, field.NotSupported(p.Child("allocation"), g.Allocation, annotations.GPUAllocations))
	}
	dp := p.Child("dra")
	if msgs := validation.IsDNS1123Subdomain(g.DRA.Driver); len(msgs) > 0 {
		errs = append(errs, field.Invalid(dp.Child("driver"), g.DRA.Driver, strings.Join(msgs, "; ")))
	}
	for i, c := range append([]string{g.DRA.DeviceClassName}, g.DRA.GPUDeviceClasses...) {
		path := dp.Child("deviceClassName")
		if i > 0 {
			path = dp.Child("gpuDeviceClasses").Index(i - 1)
		}
		if msgs := validation.IsDNS1123Subdomain(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path, c, strings.Join(msgs, "; ")))
		}
	}
	// Attribute and capacity names are C identifiers in CEL (and at most
	// 32 characters in a ResourceSlice).
	for name, v := range map[string]string{"productAttribute": g.DRA.ProductAttribute, "memoryCapacity": g.DRA.MemoryCapacity} {
		if !celIdentifier.MatchString(v) {
			errs = append(errs, field.Invalid(dp.Child(name), v, "must be a C identifier of at most 32 characters (a device attribute or capacity name)"))
		}
	}
	pp := dp.Child("products")
	for _, k := range slices.Sorted(maps.Keys(g.DRA.Products)) {
		if _, err := annotations.ParseProduct(k); err != nil {
			errs = append(errs, field.Invalid(pp.Key(k), k, "must be a value modelgate.io/gpu-product accepts"))
		}
		if v := g.DRA.Products[k]; v == "" || len(v) > 64 || strings.ContainsAny(v, "\"\\\n") {
			errs = append(errs, field.Invalid(pp.Key(k), v, "must be a product name of 1 to 64 characters without quotes, backslashes or newlines"))
		}
	}
	return errs
}

// celIdentifier is a device attribute or capacity name as CEL and the
// ResourceSlice API accept it.
var celIdentifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,31}$`)

// validateImageVolumes checks the repository patterns and the hub mirror.
func validateImageVolumes(iv *ImageVolumes, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, pat := range iv.Repositories {
		if _, err := path.Match(pat, ""); err != nil || pat == "" || strings.Contains(pat, "@") || strings.Contains(pat, "://") {
			errs = append(errs, field.Invalid(p.Child("repositories").Index(i), pat,
				"must be a registry/path pattern in path.Match syntax, without scheme, tag or digest (registry.example.com/models/*)"))
		}
	}
	if m := iv.HubMirror; m != "" && !imageRepository.MatchString(strings.TrimSuffix(m, "/")) {
		errs = append(errs, field.Invalid(p.Child("hubMirror"), m,
			"must be a registry and repository prefix in lower case, without scheme, tag or digest (registry.example.com/hf)"))
	}
	return errs
}

// imageRepository is a registry host[:port] and a lower-case path.
var imageRepository = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+$`)
