package annotations

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Parser turns an object's modelgate annotations into Settings, filling in
// the Configuration's profiles.
type Parser struct {
	// Profiles maps a profile name to its annotation values (key to value):
	// platform defaults that the object's own annotations override. The
	// Configuration checks each with ValidateProfile.
	Profiles map[string]map[string]string
}

// Parse is Parser{}.Parse: it parses with no profiles configured.
func Parse(sources ...Source) (Settings, field.ErrorList) {
	return Parser{}.Parse(sources...)
}

// Parse reads every modelgate annotation from the given sources (the
// object's own metadata first, then its templates, the pod template last)
// and returns the typed settings, with every problem found listed at once.
//
// A later source overrides an earlier one key by key, except for Inject,
// where an opt-out anywhere wins (see Combine). The profile the object
// names supplies defaults for the keys no source sets.
func (p Parser) Parse(sources ...Source) (Settings, field.ErrorList) {
	choice, errs := parseChoice(sources)
	vals := merge(sources)
	profile, perrs := p.applyProfile(vals)
	errs = append(errs, perrs...)

	var t typed
	ok := make(map[string]bool, len(vals))
	for _, key := range SettingKeys {
		v, present := vals[key]
		set := setters[key]
		if !present || set == nil {
			continue
		}
		if err := set(&t, v.raw); err != nil {
			errs = append(errs, valueError(key, v, err))
			continue
		}
		ok[key] = true
	}
	errs = append(errs, checkRules(vals, &t, ok)...)

	s := t.settings(ok)
	s.Choice, s.Profile = choice, profile
	for key := range ok {
		if s.Origins == nil {
			s.Origins = make(map[string]Origin, len(ok))
		}
		s.Origins[key] = Origin{Path: vals[key].path, Profile: vals[key].profile}
	}
	if s.Serving.WarmupTimeoutSeconds == 0 && !s.empty() {
		s.Serving.WarmupTimeoutSeconds = DefaultWarmupTimeoutSeconds
	}
	return s, errs
}

// ValidateProfile checks a profile's name and values as the Configuration
// holds them: every key must be a setting a profile may set (any of
// SettingKeys but Profile) and every value must parse. path is the
// profile's field path; errors name path.Key(key). Cross-key rules are not
// checked: a profile may hold defaults that only apply once an object sets
// what they depend on.
func (p Parser) ValidateProfile(name string, values map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if _, err := ParseProfileName(name); err != nil {
		errs = append(errs, field.Invalid(path, name, err.Error()))
	}
	for _, key := range slices.Sorted(maps.Keys(values)) {
		set, ok := setters[key]
		if !ok {
			errs = append(errs, field.NotSupported(path.Key(key), key, profileKeys()))
			continue
		}
		if err := set(&typed{}, values[key]); err != nil {
			errs = append(errs, valueError(key, value{raw: values[key], path: path.Key(key)}, err))
		}
	}
	return errs
}

// value is one setting's raw value and where it came from.
type value struct {
	raw string
	// path is the annotation's field path; for a profile's value, the path
	// of the Profile annotation that chose the profile.
	path *field.Path
	// profile names the profile the value came from, empty for the object's
	// own values.
	profile string
}

// typed holds the parsed values of the settings.
type typed struct {
	model       ModelURI
	mount       string
	delivery    Delivery
	cache       Cache
	size        resource.Quantity
	credentials string
	credKeys    []CredentialKey
	gpu         int64
	products    []string
	gpuMemory   int64
	allocation  Allocation
	engine      EngineName
	port        int32
	healthPath  string
	warmup      int32
	container   string
}

// setters parse each setting's value into its typed field, keyed by
// annotation. Profile is handled apart, since it selects the defaults.
var setters = map[string]func(t *typed, s string) error{
	Model:            func(t *typed, s string) (err error) { t.model, err = ParseModelURI(s); return err },
	ModelMount:       func(t *typed, s string) (err error) { t.mount, t.delivery, err = ParseModelMount(s); return err },
	ModelCache:       func(t *typed, s string) (err error) { t.cache, err = ParseCache(s); return err },
	ModelSize:        func(t *typed, s string) (err error) { t.size, err = ParseQuantity(s); return err },
	ModelCredentials: func(t *typed, s string) (err error) { t.credentials, err = ParseSecretName(s); return err },
	ModelCredentialsKeys: func(t *typed, s string) (err error) {
		t.credKeys, err = ParseCredentialKeys(s)
		return err
	},
	GPU:        func(t *typed, s string) (err error) { t.gpu, err = ParsePositiveInt(s, MaxGPUs); return err },
	GPUProduct: func(t *typed, s string) (err error) { t.products, err = ParseProducts(s); return err },
	GPUMemory: func(t *typed, s string) (err error) {
		t.gpuMemory, err = ParsePositiveInt(s, MaxGPUMemoryMiB)
		return err
	},
	GPUAllocation: func(t *typed, s string) (err error) {
		t.allocation, err = ParseGPUAllocation(s)
		return err
	},
	Engine:     func(t *typed, s string) (err error) { t.engine, err = ParseEngine(s); return err },
	Port:       func(t *typed, s string) (err error) { t.port, err = ParsePort(s); return err },
	HealthPath: func(t *typed, s string) (err error) { t.healthPath, err = ParseHealthPath(s); return err },
	WarmupTimeout: func(t *typed, s string) error {
		n, err := ParsePositiveInt(s, MaxWarmupTimeoutSeconds)
		t.warmup = int32(n)
		return err
	},
	Container: func(t *typed, s string) (err error) { t.container, err = ParseContainerName(s); return err },
}

// profileKeys are the keys a profile may set, in SettingKeys order.
func profileKeys() []string {
	return slices.DeleteFunc(slices.Clone(SettingKeys), func(k string) bool { return k == Profile })
}

// parseChoice reads Inject from every source and combines the choices.
func parseChoice(sources []Source) (Choice, field.ErrorList) {
	var errs field.ErrorList
	choices := make([]Choice, 0, len(sources))
	for _, src := range sources {
		c, err := ParseInject(src.Annotations, src.Path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		choices = append(choices, c)
	}
	return Combine(choices...), errs
}

// merge collects the setting keys of the sources, later ones overriding
// earlier ones.
func merge(sources []Source) map[string]value {
	vals := make(map[string]value)
	for _, src := range sources {
		for _, key := range SettingKeys {
			if v, ok := src.Annotations[key]; ok {
				vals[key] = value{raw: v, path: src.Path.Key(key)}
			}
		}
	}
	return vals
}

// applyProfile adds the values of the profile the object names to vals,
// under the object's own, and returns the profile's name.
func (p Parser) applyProfile(vals map[string]value) (string, field.ErrorList) {
	v, ok := vals[Profile]
	if !ok {
		return "", nil
	}
	defaults, ok := p.Profiles[v.raw]
	if !ok {
		if len(p.Profiles) == 0 {
			return "", field.ErrorList{field.Invalid(v.path, v.raw, "no profiles are configured")}
		}
		return "", field.ErrorList{field.NotSupported(v.path, v.raw, slices.Sorted(maps.Keys(p.Profiles)))}
	}
	for _, key := range profileKeys() {
		d, has := defaults[key]
		if _, own := vals[key]; has && !own {
			vals[key] = value{raw: d, path: v.path, profile: v.raw}
		}
	}
	return v.raw, nil
}

// valueError reports a value that does not parse, on its annotation, or on
// the Profile annotation for a profile's value.
func valueError(key string, v value, err error) *field.Error {
	bad := v.raw
	if key == Model {
		bad = RedactURI(bad)
	}
	switch {
	case v.profile != "":
		return field.Invalid(v.path, v.profile, fmt.Sprintf("profile %q sets %s to %q: %v", v.profile, key, bad, err))
	case key == Engine:
		return field.NotSupported(v.path, v.raw, Engines)
	default:
		return field.Invalid(v.path, bad, err.Error())
	}
}

// requires maps a setting to the one it only makes sense with.
var requires = map[string]string{
	ModelMount: Model, ModelCache: Model, ModelSize: Model, ModelCredentials: Model, ModelCredentialsKeys: ModelCredentials,
	GPUProduct: GPU, GPUMemory: GPU, GPUAllocation: GPU,
	Port: Engine, HealthPath: Engine,
}

// deliveryConflict is why the model cannot be delivered as model-mount
// asks; empty when it can.
func deliveryConflict(t *typed) string {
	switch {
	case t.delivery == DeliveryImageVolume && t.model.Scheme != SchemeOCI && t.model.Scheme != SchemeHF:
		return fmt.Sprintf("%q mounts an OCI image: it needs an oci:// model, or an hf:// model packed into the "+
			"Configuration's injection.imageVolumes.hubMirror; %s is %s://", DeliveryImageVolume, Model, t.model.Scheme)
	case t.delivery == DeliveryLoader && t.model.Scheme == SchemePVC:
		return fmt.Sprintf("a pvc:// model is mounted directly and has no %s", DeliveryLoader)
	case t.delivery == DeliveryEngine && t.model.Scheme == SchemePVC:
		return fmt.Sprintf("a pvc:// model is mounted directly: the engine cannot read a claim itself, so %q does not apply", DeliveryEngine)
	}
	return ""
}

// engineDeliveryRule applies engineDeliveryConflict: to the object's own
// model-mount: engine, a setting that conflicts is wrong; a profile's
// model-mount: engine does not apply where the object's own settings
// conflict with it.
func engineDeliveryRule(key string, vals map[string]value) string {
	if vals[ModelMount].profile == "" {
		return engineDeliveryConflict(key)
	}
	if key != ModelMount {
		return ""
	}
	for _, k := range []string{ModelCache, ModelCredentials, ModelCredentialsKeys} {
		if v, ok := vals[k]; ok && v.profile == "" {
			return engineDeliveryConflict(k)
		}
	}
	return ""
}

// engineDeliveryConflict is why a model the engine reads itself
// (model-mount: engine) has no use for a setting; empty when it has.
func engineDeliveryConflict(key string) string {
	switch key {
	case ModelCache:
		return fmt.Sprintf("%s: %q leaves the model to the engine: modelgate loads nothing and keeps no cache", ModelMount, DeliveryEngine)
	case ModelCredentials, ModelCredentialsKeys:
		return fmt.Sprintf("%s: %q leaves the model to the engine: give the engine its credentials; modelgate's are for its loader, which does not run", ModelMount, DeliveryEngine)
	default:
		return ""
	}
}

// pvcModelConflict is why a pvc:// model, mounted directly, has no use for
// a setting; empty when it has.
func pvcModelConflict(key string) string {
	switch key {
	case ModelCache:
		return "a pvc:// model is mounted directly and has no cache"
	case ModelCredentials, ModelCredentialsKeys:
		return "a pvc:// model is mounted directly and needs no credentials"
	default:
		return ""
	}
}

// checkRules checks the rules between settings. A rule broken by the
// object's own value is an error; a profile's value that breaks one is a
// default that does not apply, and is dropped from ok.
func checkRules(vals map[string]value, t *typed, ok map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for _, key := range SettingKeys {
		v, present := vals[key]
		if !present {
			continue
		}
		detail := ""
		if need, has := requires[key]; has {
			if _, met := vals[need]; !met {
				detail = "requires " + need
			}
		}
		if detail == "" && ok[Model] && t.model.Scheme == SchemePVC {
			detail = pvcModelConflict(key)
		}
		if detail == "" && key == ModelMount && ok[Model] && ok[ModelMount] {
			detail = deliveryConflict(t)
		}
		if detail == "" && ok[ModelMount] && t.delivery == DeliveryEngine {
			detail = engineDeliveryRule(key, vals)
		}
		if detail == "" {
			continue
		}
		delete(ok, key)
		if v.profile == "" {
			errs = append(errs, field.Invalid(v.path, v.raw, detail))
		}
	}
	if ok[ModelCache] && t.cache.Medium == CacheMemory && !ok[ModelSize] {
		// A size that is set but wrong is reported on its own.
		delete(ok, ModelCache)
		if v := vals[ModelCache]; v.profile == "" && !has(vals, ModelSize) {
			errs = append(errs, field.Invalid(v.path, v.raw, memoryNeedsSize))
		}
	}
	if ok[Engine] && t.engine == EngineCustom {
		var missing []string
		for _, key := range []string{Port, HealthPath} {
			if _, has := vals[key]; !has {
				missing = append(missing, key)
			}
		}
		if len(missing) > 0 {
			errs = append(errs, customEngineError(vals[Engine], strings.Join(missing, " and ")))
		}
	}
	return errs
}

// memoryNeedsSize is why a memory cache needs a size.
const memoryNeedsSize = "requires " + ModelSize + ": a model kept in memory is a tmpfs volume charged to the " +
	"pod's memory, and its size sets the volume's limit and the loader's memory"

// has reports whether the object or its profile sets the key.
func has(vals map[string]value, key string) bool {
	_, ok := vals[key]
	return ok
}

// customEngineError reports an engine "custom" without a port or health
// path. Unlike other rules it applies to a profile's engine too: the
// object would get probes with nothing to probe.
func customEngineError(v value, missing string) *field.Error {
	if v.profile != "" {
		return field.Invalid(v.path, v.profile, fmt.Sprintf("profile %q sets %s to %q, which has no presets and requires %s",
			v.profile, Engine, EngineCustom, missing))
	}
	return field.Invalid(v.path, v.raw, fmt.Sprintf("engine %q has no presets and requires %s", EngineCustom, missing))
}

// settings builds Settings from the values that parsed and apply.
func (t *typed) settings(ok map[string]bool) Settings {
	var s Settings
	if ok[Model] {
		m := &ModelSettings{URI: t.model, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheDisk}}
		if ok[ModelMount] {
			if t.mount != "" {
				m.MountPath = t.mount
			}
			m.Delivery = t.delivery
		}
		if ok[ModelCache] {
			m.Cache = t.cache
		}
		if ok[ModelSize] {
			size := t.size
			m.Size = &size
		}
		if ok[ModelCredentials] {
			m.Credentials = t.credentials
			if ok[ModelCredentialsKeys] {
				m.CredentialKeys = t.credKeys
			}
		}
		s.Model = m
	}
	if ok[GPU] {
		s.GPU.Count = t.gpu
		if ok[GPUProduct] {
			s.GPU.Products = t.products
		}
		if ok[GPUMemory] {
			s.GPU.MinMemoryMiB = t.gpuMemory
		}
		if ok[GPUAllocation] {
			s.GPU.Allocation = t.allocation
		}
	}
	if ok[Engine] {
		s.Serving.Engine = t.engine
		if ok[Port] {
			s.Serving.Port = t.port
		}
		if ok[HealthPath] {
			s.Serving.HealthPath = t.healthPath
		}
	}
	if ok[WarmupTimeout] {
		s.Serving.WarmupTimeoutSeconds = t.warmup
	}
	if ok[Container] {
		s.Container = t.container
	}
	return s
}

// empty reports whether the settings ask for nothing (Choice aside).
func (s Settings) empty() bool {
	return s.Model == nil && s.GPU.Count == 0 && s.Serving == (ServingSettings{}) &&
		s.Container == "" && s.Profile == ""
}
