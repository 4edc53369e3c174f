package mutators

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/modeldir"
)

// This file holds the warnings about how a serving container starts its
// engine, as the engines of today spell their command lines (see
// internal/enginefacts/engines.yaml).

// deprecatedModelFlagWarning warns when the container starts `vllm serve`
// with the model given by --model, which vLLM deprecates there (it warns
// and says the flag will be removed; from v0.8.3 to v0.11.0 it refused
// it): the model goes positionally. Only a command line that visibly
// says `vllm serve` is judged; python -m vllm.entrypoints.openai.api_server
// takes --model as it always did. Empty otherwise.
func deprecatedModelFlagWarning(c *corev1.Container, in *Input) string {
	if in.Settings.Serving.Engine != annotations.EngineVLLM || !mentions(c, "--model") {
		return ""
	}
	words := commandLine(c)
	start := engineStart(words, engineTraits{commands: []string{vllmServe}})
	if start < 0 {
		return ""
	}
	model, ok := flagValue(commandArgs(words[start:]), []string{"--model"})
	if !ok {
		return ""
	}
	return fmt.Sprintf("container %q starts `vllm serve` with --model %s, which vLLM deprecates with `vllm serve` "+
		"and will remove: give the model as its first argument, `vllm serve %s`", c.Name, clip(model), clip(model))
}

// statusServerWarning warns when a Dynamo worker gets no probes because
// its status server is off (see statusServerOff). Empty otherwise.
func statusServerWarning(c *corev1.Container, in *Input) string {
	if !statusServerOff(c, in) {
		return ""
	}
	return fmt.Sprintf("container %q runs a Dynamo worker whose status server is off (%s is not set to a port): "+
		"it serves nothing the kubelet can probe, so modelgate adds no probes; set %s (Dynamo's operator uses 9090), "+
		"or %s to the port of a server it runs", c.Name, dynamoSystemPortEnv, dynamoSystemPortEnv, annotations.Port)
}

// backendEngineWarning warns when modelgate.io/engine names Dynamo's
// backend (vllm, sglang) for a container that starts a Dynamo component:
// it is probed as Dynamo's (see servedEngine). Empty otherwise.
func backendEngineWarning(c *corev1.Container, in *Input) string {
	e := in.Settings.Serving.Engine
	if servedEngine(c, e) == e {
		return ""
	}
	return fmt.Sprintf("container %q starts NVIDIA Dynamo (python -m dynamo....), not %s's own server: it is probed as "+
		"Dynamo's; set %s: %s", c.Name, e, annotations.Engine, annotations.EngineDynamo)
}

// objectStoreSchemes are the model URIs an engine reads from object
// storage itself (vLLM's runai_streamer: vllm/transformers_utils/
// runai_utils.py, SUPPORTED_SCHEMES).
var objectStoreSchemes = []string{"s3://", "gs://", "az://"}

// streamingLoadFormats are the load formats with which an engine reads
// the model from its source itself, per engine (--load-format; see
// engines.yaml). vLLM also streams an object-store model under the
// default format, auto.
var streamingLoadFormats = map[annotations.EngineName][]string{
	annotations.EngineVLLM:   {"runai_streamer", "runai_streamer_sharded", "modelexpress", "auto"},
	annotations.EngineSGLang: {"runai_streamer", "remote", "remote_instance"},
}

// streams reports whether the container's engine reads the model r from
// its source itself: r is an object-store URI and the engine's
// --load-format (or its default) streams it. how says so in the user's
// words.
func streams(c *corev1.Container, engine annotations.EngineName, r ModelReference) (how string, ok bool) {
	if !slices.ContainsFunc(objectStoreSchemes, func(p string) bool { return strings.HasPrefix(r.Value, p) }) {
		return "", false
	}
	formats, streaming := streamingLoadFormats[engine]
	e, recognised := engines[engine]
	if !streaming || !recognised {
		return "", false
	}
	format, given := flagValue(engineArgsOrAll(c, e), []string{"--load-format"})
	if !given {
		format = "auto"
	}
	if !slices.Contains(formats, format) {
		return "", false
	}
	if !given {
		return "its default --load-format, auto, streams an object-store model", true
	}
	return "--load-format " + format, true
}

// engineArgsOrAll is engineArgs, or the whole command line when those
// cannot be told apart.
func engineArgsOrAll(c *corev1.Container, e engineTraits) []word {
	if args := engineArgs(c, e); args != nil {
		return args
	}
	return commandLine(c)
}

// secondReadWarning warns when modelgate's loader would read a model that
// the engine reads from object storage itself (vllm serve s3://... with
// --load-format runai_streamer): the model would be read twice, once into
// the loader's volume, which the engine ignores. Empty otherwise.
func secondReadWarning(c *corev1.Container, m *annotations.ModelSettings, r ModelReference, how string) string {
	return fmt.Sprintf("container %q reads the model %q from its source itself (%s), and modelgate's loader would read "+
		"%s a second time into %s, which the engine does not use: set %s: %s to leave the model to the engine, "+
		"or point the engine at %s", c.Name, clip(r.Value), how, annotations.Model, m.MountPath,
		annotations.ModelMount, annotations.DeliveryEngine, m.MountPath)
}

// engineReadsOtherWarning warns when a model left to the engine
// (model-mount: engine) is not the one the engine is told to read: nothing
// is mounted, so a path names nothing modelgate put there.
func engineReadsOtherWarning(container string, m *annotations.ModelSettings, r ModelReference) string {
	return fmt.Sprintf("container %q names the model %q (%s), but %s is %q and %s: %s leaves it to the engine, "+
		"which mounts nothing: it would serve that model, not the annotated one", container, clip(r.Value), r.Source,
		annotations.Model, clip(m.URI.Raw), annotations.ModelMount, annotations.DeliveryEngine)
}

// engineReads reports whether a model the container names is the
// annotated one, for a model the engine reads itself: the URI as written,
// or an hf:// model's repository.
func engineReads(m *annotations.ModelSettings, value string) bool {
	return value == m.URI.Raw || (m.URI.Scheme == annotations.SchemeHF && value == m.URI.Path)
}

// clip bounds how much of a value a warning repeats.
func clip(v string) string {
	if len(v) > maxWarnedValue {
		return v[:maxWarnedValue] + "..."
	}
	return v
}

// hubTokenVariables are the variables the Hub's clients read a token from
// (huggingface_hub's HF_TOKEN and its older HUGGING_FACE_HUB_TOKEN).
var hubTokenVariables = []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}

// engineTokenWarning warns when the serving container gives its engine a
// Hub token (published manifests do, from a Secret, for gated models)
// while modelgate's loader, which downloads the hf:// model in its place
// (the engine runs with HF_HUB_OFFLINE), is given no credentials: a gated
// or private model would fail to load. Empty otherwise.
func engineTokenWarning(t *Target, c *corev1.Container, m *annotations.ModelSettings, o *Options) string {
	if m.URI.Scheme != annotations.SchemeHF || m.Credentials != "" || o == nil || !needsLoader(m, o.Loader) {
		return ""
	}
	if !slices.Contains(t.owns, ownLoader) {
		return "" // a loader of the user's own has what it was given
	}
	i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return slices.Contains(hubTokenVariables, v.Name) })
	if i < 0 {
		return ""
	}
	from := "its env"
	if r := c.Env[i].ValueFrom; r != nil && r.SecretKeyRef != nil {
		from = fmt.Sprintf("key %q of Secret %q", r.SecretKeyRef.Key, r.SecretKeyRef.Name)
	}
	return fmt.Sprintf("container %q gives its engine %s (%s), but modelgate's loader downloads %s in its place with no "+
		"credentials (the engine runs offline): a gated or private model would fail to load; set %s to the Secret that "+
		"holds the token", c.Name, c.Env[i].Name, from, clip(m.URI.Raw), annotations.ModelCredentials)
}

// tritonRepositoryWarning warns when Triton is given, as its model
// repository, the directory modelgate's loader fills: Triton takes every
// directory there for a model, hidden ones too (LocalFileSystem::
// GetDirectoryContents in triton-inference-server/core skips only . and
// ..), so the loader's state directory is a model without a version,
// which fails to load, and Triton exits. Empty otherwise.
func tritonRepositoryWarning(t *Target, c *corev1.Container, m *annotations.ModelSettings, in *Input) string {
	if servedEngine(c, in.Settings.Serving.Engine) != annotations.EngineTriton || in.Options == nil ||
		!needsLoader(m, in.Options.Loader) || !slices.Contains(t.owns, ownLoader) {
		return ""
	}
	for _, r := range ModelReferences(c.Command, c.Args, c.Env) {
		if r.Source != "--model-repository" && r.Source != "--model-store" {
			continue
		}
		if p := path.Clean(r.Value); p == m.MountPath {
			return fmt.Sprintf("container %q gives Triton %s as %s, where modelgate's loader keeps its state (%s) beside "+
				"the model: Triton loads every directory there as a model, fails on that one and exits; mount the model as an "+
				"image volume (an oci:// model packed by `modelgate pack`, %s: %s) or use a pvc:// model, which carry no "+
				"loader state", c.Name, p, r.Source, path.Join(m.MountPath, modeldir.StateDir),
				annotations.ModelMount, annotations.DeliveryImageVolume)
		}
	}
	return ""
}
