package mutators

import (
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/modeldir"
)

// The environment the serving container of an hf:// model gets, so that an
// engine given the repository id (vllm serve org/model, TGI's --model-id,
// SGLang's --model-path) finds the files the loader laid out as a Hugging
// Face hub cache in the model volume, and never calls the Hub for them. An
// engine given the mount path as a directory reads the plain view beside
// the cache and ignores both.
const (
	// EnvHFHubCache points huggingface_hub at the hub cache in the model
	// volume: <model mount>/.cache/huggingface/hub (modeldir.HFCacheDir).
	EnvHFHubCache = "HF_HUB_CACHE"
	// EnvHuggingFaceHubCache is its older name, which Text Generation
	// Inference reads and HF_HUB_CACHE does not replace there: its Python
	// server takes huggingface_hub.constants.HUGGINGFACE_HUB_CACHE
	// (server/text_generation_server/utils/hub.py) and its router reads
	// the variable itself (router/src/server.rs), at v3.3.7.
	EnvHuggingFaceHubCache = "HUGGINGFACE_HUB_CACHE"
	// EnvHFHubOffline, "1", makes huggingface_hub resolve from that cache
	// only.
	EnvHFHubOffline = "HF_HUB_OFFLINE"
)

// hfEnv is the environment of the serving container of an hf:// model that
// modelgate's loader fetches, in the order it is added: the cache under
// both its names, and offline mode.
func hfEnv(m *annotations.ModelSettings) []corev1.EnvVar {
	dir := path.Join(m.MountPath, modeldir.HFCacheDir)
	return []corev1.EnvVar{
		{Name: EnvHFHubCache, Value: dir},
		{Name: EnvHuggingFaceHubCache, Value: dir},
		{Name: EnvHFHubOffline, Value: "1"},
	}
}

// cacheVariableNames are the two names of the hub cache's variable.
var cacheVariableNames = []string{EnvHFHubCache, EnvHuggingFaceHubCache}

// withoutUsersCache drops the cache variables from want when the container
// sets either itself: the two names are one setting, and the user's is
// kept whole (hubCacheWarning says when it is not where the loader writes).
func withoutUsersCache(in *Input, c *corev1.Container, want []corev1.EnvVar) []corev1.EnvVar {
	for _, name := range cacheVariableNames {
		if i := envIndex(c.Env, name); i >= 0 && !in.Previous.Owned(envPart(c.Name, c.Env[i])) {
			return slices.DeleteFunc(slices.Clone(want), func(v corev1.EnvVar) bool {
				return slices.Contains(cacheVariableNames, v.Name)
			})
		}
	}
	return want
}

// envPart names a variable modelgate set on a container, with the value it
// set: a value the user has since changed is theirs.
func envPart(container string, v corev1.EnvVar) string {
	return part(partEnv, container, v.Name+"="+v.Value)
}

// setEnv gives the container each variable of want that it does not set
// itself in env, ahead of its own variables (so that theirs can refer to
// modelgate's as $(NAME)). A variable an earlier pass set (as the previous
// record says, with the value it still has) is modelgate's: it follows
// want, and goes when want no longer names it, from this container or any
// other (the serving container changed). A variable the container sets
// itself is never touched. It reports whether the spec changed.
func setEnv(t *Target, in *Input, c *corev1.Container, want []corev1.EnvVar) bool {
	var keep []string
	var add []corev1.EnvVar
	for _, v := range want {
		if i := envIndex(c.Env, v.Name); i >= 0 && !in.Previous.Owned(envPart(c.Name, c.Env[i])) {
			continue // the user's own
		}
		keep = append(keep, envPart(c.Name, v))
		add = append(add, v)
	}
	changed := releaseEnv(t, in, keep)
	// What is left under a wanted name is modelgate's, with the wanted
	// value: releaseEnv took out the others.
	at := 0
	for _, v := range add {
		t.Own(envPart(c.Name, v))
		if i := envIndex(c.Env, v.Name); i >= 0 {
			at = i + 1
			continue
		}
		c.Env = slices.Insert(slices.Clone(c.Env), at, v)
		at++
		changed = true
	}
	return changed
}

// releaseEnv removes the variables an earlier pass set that are not in
// keep (parts as envPart names them), where they still have the value
// modelgate set. It reports whether the spec changed.
func releaseEnv(t *Target, in *Input, keep []string) bool {
	changed := false
	for _, rest := range in.Previous.ownedOf(partEnv) {
		if slices.Contains(keep, part(partEnv, rest)) {
			continue
		}
		container, variable, _ := strings.Cut(rest, "/")
		name, value, _ := strings.Cut(variable, "=")
		c := containerNamed(t.PodSpec, container)
		if c == nil {
			continue
		}
		i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool {
			return v.Name == name && v.Value == value && v.ValueFrom == nil
		})
		if i < 0 {
			continue // changed by the user since: theirs
		}
		c.Env = deleteAt(slices.Clone(c.Env), i)
		changed = true
	}
	return changed
}

// envIndex is the index of the first variable with the name, or -1.
func envIndex(env []corev1.EnvVar, name string) int {
	return slices.IndexFunc(env, func(v corev1.EnvVar) bool { return v.Name == name })
}
