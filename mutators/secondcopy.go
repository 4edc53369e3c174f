package mutators

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
)

// cacheVariables are the variables that point an engine's model downloads
// at a directory: huggingface_hub's (HF_HUB_CACHE, its older name, HF_HOME
// above it), transformers' old TRANSFORMERS_CACHE, and vLLM's and
// ModelScope's own.
var cacheVariables = []string{
	"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "TRANSFORMERS_CACHE", "VLLM_CACHE_ROOT", "MODELSCOPE_CACHE",
}

// cacheFlags name a download directory on an engine's command line:
// vLLM's --download-dir, TGI's --huggingface-hub-cache.
var cacheFlags = []string{"--download-dir", "--huggingface-hub-cache"}

// hubCachePath is where huggingface_hub keeps downloads by default, as
// root (vLLM's and SGLang's images run as root).
const hubCachePath = "/root/.cache/huggingface"

// tgiCachePath is TGI's download directory: its image sets HF_HOME=/data
// (3.x; 2.x set HUGGINGFACE_HUB_CACHE=/data), so the hub cache is
// /data/hub, and a mount at /data or /data/hub holds it.
const tgiCachePath = "/data/hub"

// secondCopyWarning warns when modelgate's loader fills a volume of its
// own (disk or memory cache) while the serving container already mounts a
// writable volume of the pod's as its model cache: a mount that an HF or
// engine cache variable, a download-dir flag or a well-known cache path
// points at. The node would hold the model twice (a 70B model: 150Gi on
// the PVC and 150Gi more in the emptyDir). A read-only cache of an hf://
// model is warned about too: the engine is pointed away from it. Empty
// when there is no such mount.
func secondCopyWarning(spec *corev1.PodSpec, c *corev1.Container, m *annotations.ModelSettings, engine annotations.EngineName, o *Options) string {
	if o == nil || (m.Cache.Medium != annotations.CacheDisk && m.Cache.Medium != annotations.CacheMemory) {
		return ""
	}
	if !needsLoader(m, o.Loader) {
		return ""
	}
	targets := cacheTargets(c, engine)
	for _, vm := range c.VolumeMounts {
		if vm.Name == ModelVolumeName {
			continue
		}
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == vm.Name })
		if i < 0 {
			continue
		}
		why := cacheUse(path.Clean(vm.MountPath), targets)
		if why == "" {
			continue
		}
		if readOnlyVolume(spec.Volumes[i]) != "" || vm.ReadOnly {
			// A cache the pod only reads (a node's prefilled hostPath, say)
			// cannot be loaded into; with an hf:// model the engine is
			// pointed away from it (HF_HUB_CACHE), so it goes unused.
			if m.URI.Scheme != annotations.SchemeHF {
				continue
			}
			return fmt.Sprintf("container %q mounts volume %q read-only at %s as its model cache (%s); modelgate loads the "+
				"model again into a %s volume of its own at %s and points the engine there, so that cache goes unused: if it "+
				"holds the model, serve the model from it without %s", c.Name, vm.Name, vm.MountPath, why, m.Cache.Medium,
				m.MountPath, annotations.Model)
		}
		return fmt.Sprintf("container %q already mounts volume %q at %s as its model cache (%s); modelgate loads a second copy "+
			"of the model into a %s volume of its own at %s: set %s: \"%s:%s\" to load the model into that volume instead",
			c.Name, vm.Name, vm.MountPath, why, m.Cache.Medium, m.MountPath, annotations.ModelCache, annotations.CacheVolume, vm.Name)
	}
	return ""
}

// cacheTarget is a directory the container names as a model cache, and
// how it names it.
type cacheTarget struct{ dir, how string }

// cacheTargets are the cache directories the container's variables and
// command line name, and the engine's default one.
func cacheTargets(c *corev1.Container, engine annotations.EngineName) []cacheTarget {
	var out []cacheTarget
	vars := plainEnv(c.Env)
	for _, name := range cacheVariables {
		if v, ok := vars.get(name); ok {
			if s, ok := expand(v, vars); ok && path.IsAbs(s) {
				out = append(out, cacheTarget{path.Clean(s), name + "=" + s})
			}
		}
	}
	words := commandLine(c)
	if v, ok := flagValue(words, cacheFlags); ok && path.IsAbs(v) {
		out = append(out, cacheTarget{path.Clean(v), "a download directory on its command line"})
	}
	out = append(out, cacheTarget{hubCachePath, "the Hugging Face cache of an engine running as root"})
	if engine == annotations.EngineTGI {
		out = append(out, cacheTarget{tgiCachePath, "TGI's cache directory"})
	}
	return out
}

// cacheUse says how the container uses a mount at dir as a cache: a
// target at or under it. Empty when none is.
func cacheUse(dir string, targets []cacheTarget) string {
	for _, t := range targets {
		if t.dir == dir || strings.HasPrefix(t.dir, dir+"/") {
			return t.how
		}
	}
	return ""
}
