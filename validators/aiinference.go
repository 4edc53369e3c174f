package validators

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	servingv1 "github.com/modelgate/modelgate/api/v1"
)

// AIInferenceSettings parses an AIInference spec into the typed settings the
// injection annotations parse into, with the same parsers, so that a model
// URI, a GPU product or an engine is judged the same way wherever it is
// written. Every problem is returned, each at its field path; the settings
// hold what parsed.
func AIInferenceSettings(spec *servingv1.AIInferenceSpec) (annotations.Settings, field.ErrorList) {
	p := field.NewPath("spec")
	var s annotations.Settings
	var errs field.ErrorList

	model, merrs := modelSettings(&spec.Model, p.Child("model"))
	s.Model, errs = model, append(errs, merrs...)

	if g := spec.GPU; g != nil {
		s.GPU = annotations.GPUSettings{Count: int64(g.Count), MinMemoryMiB: int64(g.MinMemoryMiB)}
		seen := sets.New[string]()
		for i, prod := range g.Products {
			pp := p.Child("gpu", "products").Index(i)
			if _, err := annotations.ParseProduct(prod); err != nil {
				errs = append(errs, field.Invalid(pp, prod, err.Error()))
				continue
			}
			if seen.Has(prod) {
				errs = append(errs, field.Duplicate(pp, prod))
				continue
			}
			seen.Insert(prod)
			s.GPU.Products = append(s.GPU.Products, prod)
		}
	}

	serving, serrs := servingSettings(spec, p)
	s.Serving, errs = serving, append(errs, serrs...)
	return s, errs
}

// ValidateAIInference parses a v1 AIInference into its settings and
// returns, with them, every problem its OpenAPI schema does not catch (and
// those it does, for objects that never went through it): the settings'
// parse errors, resources naming GPUs, requests over limits and invalid
// scheduling. gpuResource is the configured GPU resource name, rejected in
// spec.resources like any "*/gpu".
func ValidateAIInference(obj *servingv1.AIInference, gpuResource corev1.ResourceName) (annotations.Settings, field.ErrorList) {
	s, errs := AIInferenceSettings(&obj.Spec)
	p := field.NewPath("spec")
	if r := obj.Spec.Resources; r != nil {
		errs = append(errs, validateResources(r, gpuResource, p.Child("resources"))...)
	}
	if sc := obj.Spec.Scheduling; sc != nil {
		errs = append(errs, validateScheduling(sc, p.Child("scheduling"))...)
	}
	if r := obj.Spec.Replicas; r != nil && (*r < 0 || *r > maxReplicas) {
		errs = append(errs, field.Invalid(p.Child("replicas"), *r, fmt.Sprintf("must be from 0 to %d", maxReplicas)))
	}
	return s, errs
}

// maxReplicas bounds spec.replicas, as the CRD schema does.
const maxReplicas = 1024

func modelSettings(m *servingv1.ModelSpec, p *field.Path) (*annotations.ModelSettings, field.ErrorList) {
	var errs field.ErrorList
	raw := m.URI
	if m.Revision != "" {
		switch {
		case !strings.HasPrefix(m.URI, string(annotations.SchemeHF)+"://"):
			errs = append(errs, field.Forbidden(p.Child("revision"), "revision is only for an hf:// uri"))
		case strings.Contains(m.URI, "@"):
			errs = append(errs, field.Forbidden(p.Child("revision"),
				"revision must not be set when uri already names one after @"))
		default:
			raw = m.URI + "@" + m.Revision
		}
	}
	uri, uerr := annotations.ParseModelURI(raw)
	if uerr != nil {
		path, value := p.Child("uri"), m.URI
		if raw != m.URI {
			// The URI alone parsed: the revision is what is wrong.
			if _, uerr := annotations.ParseModelURI(m.URI); uerr == nil {
				path, value = p.Child("revision"), m.Revision
			}
		}
		// A signed URL's query is not echoed back (RedactURI).
		errs = append(errs, field.Invalid(path, annotations.RedactURI(value), uerr.Error()))
	}
	out := &annotations.ModelSettings{URI: uri, MountPath: annotations.DefaultModelMount,
		Cache: annotations.Cache{Medium: annotations.CacheDisk}}
	if c := m.Cache; c != nil {
		spec := string(c.Medium)
		if c.Medium == servingv1.CachePVC {
			spec += ":" + c.ClaimName
		}
		cache, err := annotations.ParseCache(spec)
		switch {
		case err == nil:
			out.Cache = cache
		case c.Medium == servingv1.CachePVC && c.ClaimName == "":
			errs = append(errs, field.Required(p.Child("cache", "claimName"), "claimName is required with medium pvc"))
		case c.Medium == servingv1.CachePVC:
			errs = append(errs, field.Invalid(p.Child("cache", "claimName"), c.ClaimName, err.Error()))
		default:
			errs = append(errs, field.NotSupported(p.Child("cache", "medium"), c.Medium,
				[]servingv1.CacheMedium{servingv1.CacheDisk, servingv1.CacheMemory, servingv1.CachePVC}))
		}
		if c.Medium != servingv1.CachePVC && c.ClaimName != "" {
			errs = append(errs, field.Forbidden(p.Child("cache", "claimName"), "claimName is only for medium pvc"))
		}
		if c.SizeLimit != nil {
			if c.Medium == servingv1.CachePVC {
				errs = append(errs, field.Forbidden(p.Child("cache", "sizeLimit"),
					"sizeLimit applies to disk and memory; a pvc's size is the claim's"))
			} else if c.SizeLimit.Sign() <= 0 {
				errs = append(errs, field.Invalid(p.Child("cache", "sizeLimit"), c.SizeLimit.String(), "must be positive"))
			}
			out.Size = c.SizeLimit
		}
		if uri.Scheme == annotations.SchemePVC {
			errs = append(errs, field.Forbidden(p.Child("cache"),
				"cache does not apply to a pvc:// model, which is mounted directly"))
		}
	}
	if r := m.CredentialsSecretRef; r != nil {
		if _, err := annotations.ParseSecretName(r.Name); err != nil {
			errs = append(errs, field.Invalid(p.Child("credentialsSecretRef", "name"), r.Name, err.Error()))
		}
		out.Credentials = r.Name
	}
	if uerr != nil {
		return nil, errs
	}
	return out, errs
}

// aiInferenceEngines are spec.engine.name's values (the CRD's enum).
var aiInferenceEngines = []servingv1.EngineName{servingv1.EngineVLLM, servingv1.EngineSGLang, servingv1.EngineTGI,
	servingv1.EngineTriton, servingv1.EngineCustom}

func joinEngines(names []servingv1.EngineName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

func servingSettings(spec *servingv1.AIInferenceSpec, p *field.Path) (annotations.ServingSettings, field.ErrorList) {
	var errs field.ErrorList
	e := &spec.Engine
	ep := p.Child("engine")
	out := annotations.ServingSettings{WarmupTimeoutSeconds: annotations.DefaultWarmupTimeoutSeconds}
	name := e.Name
	if name == "" {
		name = servingv1.EngineVLLM
	}
	engine, err := annotations.ParseEngine(string(name))
	if err != nil || !slices.Contains(aiInferenceEngines, name) {
		// The CRD's own list: an AIInference runs one engine per Pod, and
		// Dynamo's frontend and workers are not one.
		errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "must be one of: "+joinEngines(aiInferenceEngines)))
	}
	out.Engine = engine
	if e.Port != 0 {
		if _, err := annotations.ParsePort(fmt.Sprint(e.Port)); err != nil {
			errs = append(errs, field.Invalid(ep.Child("port"), e.Port, err.Error()))
		}
		out.Port = e.Port
	}
	if e.HealthPath != "" {
		if _, err := annotations.ParseHealthPath(e.HealthPath); err != nil {
			errs = append(errs, field.Invalid(ep.Child("healthPath"), e.HealthPath, err.Error()))
		}
		out.HealthPath = e.HealthPath
	}
	if engine == annotations.EngineCustom {
		if e.Image == "" {
			errs = append(errs, field.Required(ep.Child("image"), "an image is required when name is custom"))
		}
		if e.Port == 0 {
			errs = append(errs, field.Required(ep.Child("port"), "a port is required when name is custom"))
		}
	}
	for i, ev := range e.Env {
		for _, msg := range validation.IsEnvVarName(ev.Name) {
			errs = append(errs, field.Invalid(ep.Child("env").Index(i).Child("name"), ev.Name, msg))
		}
	}
	if w := spec.Warmup; w != nil && w.TimeoutSeconds != 0 {
		if w.TimeoutSeconds < 1 || w.TimeoutSeconds > annotations.MaxWarmupTimeoutSeconds {
			errs = append(errs, field.Invalid(p.Child("warmup", "timeoutSeconds"), w.TimeoutSeconds,
				fmt.Sprintf("must be from 1 to %d seconds", annotations.MaxWarmupTimeoutSeconds)))
		} else {
			out.WarmupTimeoutSeconds = w.TimeoutSeconds
		}
	}
	return out, errs
}

// validateResources rejects GPUs in spec.resources (they are asked with
// spec.gpu, so that placement and policies see one number) and requests
// above limits.
func validateResources(r *corev1.ResourceRequirements, gpuResource corev1.ResourceName, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		for name, q := range list.rl {
			rp := p.Child(list.name).Key(string(name))
			if name == gpuResource || strings.HasSuffix(string(name), "/gpu") {
				errs = append(errs, field.Forbidden(rp, "GPUs are asked with spec.gpu, not spec.resources"))
				continue
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(rp, q.String(), "must not be negative"))
			}
		}
	}
	if len(r.Claims) > 0 {
		errs = append(errs, field.Forbidden(p.Child("claims"), "resource claims are not supported on an AIInference"))
	}
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the limit %s", lim.String())))
		}
	}
	return errs
}

// validateScheduling checks the node selector, tolerations and priority
// class as the API server would check them on a pod.
func validateScheduling(s *servingv1.SchedulingSpec, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))
	if s.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(s.PriorityClassName) {
			errs = append(errs, field.Invalid(p.Child("priorityClassName"), s.PriorityClassName, msg))
		}
	}
	for i, t := range s.Tolerations {
		errs = append(errs, validateToleration(&t, p.Child("tolerations").Index(i))...)
	}
	return errs
}

func validateToleration(t *corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator,
				"must be Exists when key is empty (to tolerate every taint)"))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator,
			[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []corev1.TaintEffect{
			corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect,
			"must be NoExecute when tolerationSeconds is set"))
	}
	return errs
}
