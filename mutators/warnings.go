package mutators

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// Warnings are modelgate's advice on an injected target: what will likely
// not work as the user meant, one message per problem, in words about what
// they wrote. Admission goes on; the webhook returns them as admission
// warnings. It reads the target as the chain left it, and warns when
//
//   - the serving container names a model (see ModelReferences) that is
//     neither the annotated hf:// repository nor a path under the model
//     mount: the engine would serve that model and leave the loaded one
//     unused;
//   - a profile's modelgate.io/gpu differs from the count the serving
//     container declares, which wins (see GPUPlacement);
//   - modelgate's loader fills a volume of its own while the serving
//     container already mounts a model cache of the pod's (see
//     secondCopyWarning): two copies of the model;
//   - the serving container of an hf:// model sets HF_HUB_CACHE itself to
//     another directory than the one modelgate's loader fills (see
//     hubCacheWarning);
//   - the model goes into a claim of the pod's own and the pod sets no
//     fsGroup (see cacheVolumeOwnerWarning);
//   - the serving container starts SGLang listening on loopback only (see
//     loopbackWarning);
//   - it starts `vllm serve` with the deprecated --model (see
//     deprecatedModelFlagWarning), or a Dynamo worker whose status server
//     is off, which gets no probes (see statusServerWarning);
//   - it gives its engine a Hub token while modelgate's loader, which
//     downloads the hf:// model instead, has no credentials (see
//     engineTokenWarning);
//   - its engine streams the model from object storage itself while
//     modelgate's loader would read it too (see secondReadWarning), or,
//     with model-mount: engine, it names another model than the annotated
//     one (see engineReadsOtherWarning);
//   - the model is kept in memory and the serving container's memory limit
//     is below the model's size: the tmpfs pages count against the pod's
//     memory once the loader exits.
func Warnings(t *Target, in *Input) []string {
	if in.Container < 0 || in.Container >= len(t.PodSpec.Containers) {
		return nil
	}
	c := &t.PodSpec.Containers[in.Container]
	var out []string
	if w := profileGPUWarning(c, in); w != "" {
		out = append(out, w)
	}
	for _, w := range []string{loopbackWarning(c, in), deprecatedModelFlagWarning(c, in), backendEngineWarning(c, in),
		statusServerWarning(c, in)} {
		if w != "" {
			out = append(out, w)
		}
	}
	m := in.Settings.Model
	if m == nil {
		return out
	}
	if m.Delivery == annotations.DeliveryEngine {
		for _, r := range ModelReferences(c.Command, c.Args, c.Env) {
			if !engineReads(m, r.Value) {
				out = append(out, engineReadsOtherWarning(c.Name, m, r))
			}
		}
		return out
	}
	if m.Cache.Medium == annotations.CacheVolume {
		// The model is where the serving container mounts the volume.
		if _, dir, err := userCacheVolume(t, in, m); err == nil {
			resolved := *m
			resolved.MountPath = dir
			m = &resolved
		}
	}
	for _, r := range ModelReferences(c.Command, c.Args, c.Env) {
		if servesModel(m, c.WorkingDir, r.Value) {
			continue
		}
		if how, ok := streams(c, in.Settings.Serving.Engine, r); ok && in.Options != nil && needsLoader(m, in.Options.Loader) {
			out = append(out, secondReadWarning(c, m, r, how))
			continue
		}
		out = append(out, otherModelWarning(c.Name, m, r))
	}
	if w := memoryLimitWarning(c, m, in.Options); w != "" {
		out = append(out, w)
	}
	if w := hubCacheWarning(t, c, m, in.Options); w != "" {
		out = append(out, w)
	}
	if w := engineTokenWarning(t, c, m, in.Options); w != "" {
		out = append(out, w)
	}
	if w := tritonRepositoryWarning(t, c, m, in); w != "" {
		out = append(out, w)
	}
	if w := cacheVolumeOwnerWarning(t.PodSpec, m, in.Options); w != "" {
		out = append(out, w)
	}
	if w := secondCopyWarning(t.PodSpec, c, m, in.Settings.Serving.Engine, in.Options); w != "" {
		out = append(out, w)
	}
	return out
}

// servesModel reports whether a model the container names is the one
// modelgate loads: the hf:// repository (case-sensitive, as the Hub is) or
// a path under the mount, relative paths taken from the container's
// working directory. A relative path starting with '.' without a working
// directory depends on the image's, which modelgate cannot see: it is
// given the benefit of the doubt.
func servesModel(m *annotations.ModelSettings, workingDir, value string) bool {
	if m.URI.Scheme == annotations.SchemeHF && value == m.URI.Path {
		return true
	}
	p := value
	if !path.IsAbs(p) {
		if !path.IsAbs(workingDir) {
			return strings.HasPrefix(p, ".")
		}
		p = path.Join(workingDir, p)
	}
	p = path.Clean(p)
	return p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")
}

// maxWarnedValue bounds how much of a value a warning repeats.
const maxWarnedValue = 128

func otherModelWarning(container string, m *annotations.ModelSettings, r ModelReference) string {
	v := clip(r.Value)
	if m.URI.Scheme == annotations.SchemeHF {
		return fmt.Sprintf("container %q names the model %q (%s), which is neither the repository of %s (%q) "+
			"nor a path under %s (%s): it would serve that model, not the one modelgate loads",
			container, v, r.Source, annotations.Model, m.URI.Path, annotations.ModelMount, m.MountPath)
	}
	return fmt.Sprintf("container %q names the model %q (%s), which is not a path under %s (%s), "+
		"where modelgate loads %s: it would serve that model, not the one modelgate loads",
		container, v, r.Source, annotations.ModelMount, m.MountPath, annotations.Model)
}

// memoryLimitWarning warns when a model kept in memory is larger than the
// serving container's memory limit; empty when it is not.
func memoryLimitWarning(c *corev1.Container, m *annotations.ModelSettings, o *Options) string {
	if m.Size == nil || o == nil {
		return ""
	}
	if m.Cache.Medium != annotations.CacheMemory || !needsLoader(m, o.Loader) {
		return ""
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok || limit.Cmp(*m.Size) >= 0 {
		return ""
	}
	return fmt.Sprintf("container %q has a memory limit of %s, below %s (%s): with %s: %s the model is a tmpfs "+
		"whose pages count against the pod's memory once the loader exits; raise the limit to cover the model and the engine",
		c.Name, limit.String(), annotations.ModelSize, m.Size.String(), annotations.ModelCache, annotations.CacheMemory)
}

// profileGPUWarning says that the serving container's own GPU count won
// over the profile's modelgate.io/gpu; empty when it did not differ.
func profileGPUWarning(c *corev1.Container, in *Input) string {
	g := in.Settings.GPU
	o := in.Settings.Origin(annotations.GPU)
	if g.Count <= 0 || o.Profile == "" || in.Options == nil {
		return ""
	}
	name := in.Options.GPU.ResourceName
	declared, ok := declaredGPUs(c, in, name)
	if !ok || declared.CmpInt64(g.Count) == 0 {
		return ""
	}
	return fmt.Sprintf("container %q declares %s: %s, which wins over profile %q's %s: %d; the profile's count applies only "+
		"to containers that declare none", c.Name, name, declared.String(), o.Profile, annotations.GPU, g.Count)
}

// hubCacheWarning warns when the serving container of an hf:// model that
// modelgate's loader fetches sets HF_HUB_CACHE or HUGGINGFACE_HUB_CACHE
// itself (modelgate never overrides them) to a directory other than the
// hub cache the loader lays out: with HF_HUB_OFFLINE, an engine given the
// repository id would not find the model. Whether the loader is
// modelgate's is what the pass that just ran owns (Target.Own). Empty
// otherwise.
func hubCacheWarning(t *Target, c *corev1.Container, m *annotations.ModelSettings, o *Options) string {
	if m.URI.Scheme != annotations.SchemeHF || o == nil {
		return ""
	}
	if !needsLoader(m, o.Loader) {
		return ""
	}
	if !slices.Contains(t.owns, ownLoader) {
		return "" // a loader of the user's own lays out what it likes
	}
	want := hfEnv(m)[0].Value
	vars := plainEnv(c.Env)
	for _, name := range cacheVariableNames {
		i := envIndex(c.Env, name)
		if i < 0 || c.Env[i].ValueFrom != nil || slices.Contains(t.owns, envPart(c.Name, c.Env[i])) {
			continue
		}
		got, ok := expand(c.Env[i].Value, vars)
		if !ok || path.Clean(got) == want {
			continue
		}
		return fmt.Sprintf("container %q sets %s=%s itself, but modelgate's loader lays the Hugging Face cache out at %s: "+
			"an engine given the repository id would not find the model there; remove the variable or set it to %s",
			c.Name, name, got, want, want)
	}
	return ""
}

// loopbackWarning warns when the serving container starts SGLang without
// a --host the kubelet can reach: its probes, modelgate's or the user's,
// would never pass. Empty otherwise.
func loopbackWarning(c *corev1.Container, in *Input) string {
	only, host := loopbackOnly(c, in.Settings.Serving.Engine)
	if !only {
		return ""
	}
	given := "without --host"
	if host != "" {
		given = "with --host " + host
	}
	return fmt.Sprintf("container %q starts SGLang %s, so it listens on the loopback address only and the kubelet's "+
		"probes cannot reach it: add --host 0.0.0.0", c.Name, given)
}
