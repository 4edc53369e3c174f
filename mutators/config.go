package mutators

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/internal/seal"
)

// Options are the platform settings the mutators work with, taken from the
// Configuration when the webhook starts. Mutators never read anything else.
type Options struct {
	Loader LoaderOptions
	GPU    GPUOptions
	Probes ProbeOptions
	// Seal signs the reserved metadata modelgate writes and verifies what
	// an object carries; with a nil Seal nothing an object carries is
	// trusted (see internal/seal).
	Seal *seal.Key
}

// LoaderOptions configure the model-loader init container.
type LoaderOptions struct {
	// Image, Command, Args and SecurityContext are the default loader, as
	// in LoaderImage.
	Image           string
	Command         []string
	Args            []string
	SecurityContext *corev1.SecurityContext
	// Schemes overrides the default loader per URI scheme: a scheme's
	// LoaderImage is the whole loader, taking nothing from the default.
	Schemes map[annotations.Scheme]LoaderImage
	// Resources are the loader's requests and limits. When the model has a
	// size, the ephemeral-storage request is raised to it for disk caches.
	Resources corev1.ResourceRequirements
	// ImageVolumes say which models are mounted as image volumes
	// (Kubernetes 1.33+) instead of being loaded.
	ImageVolumes ImageVolumeOptions
	// PullPolicy is the loader's image pull policy.
	PullPolicy corev1.PullPolicy
	// Env is the default loader's environment beside what modelgate sets
	// (the Pod's UID, the credentials): literal values, the cluster's
	// endpoints and settings, each a default the Pod's own variables win
	// over (written as LoaderDefaultEnvPrefix + name). A scheme's loader
	// does not get it.
	Env []corev1.EnvVar
}

// LoaderImage is a loader: its image, command, arguments and security
// context.
type LoaderImage struct {
	Image string
	// Command is the image's entrypoint when nil.
	Command []string
	// Args is a template (see CheckLoaderArgs) whose ArgURI and ArgDest
	// are replaced by the model URI and the mount path. Nil passes
	// --uri=<uri> --dest=<mount>, as `modelgate load` reads them.
	Args []string
	// SecurityContext replaces the default, DefaultLoaderSecurityContext,
	// when not nil; an empty one gives the loader none.
	SecurityContext *corev1.SecurityContext
}

// GPUOptions name the node labels, resource and taint of the GPU vendor.
// The defaults are NVIDIA's (GPU Feature Discovery labels, the device
// plugin's resource, the usual taint); another vendor is a configuration
// change.
type GPUOptions struct {
	// ResourceName is the extended resource, nvidia.com/gpu.
	ResourceName corev1.ResourceName
	// ProductLabel is the node label holding the product,
	// nvidia.com/gpu.product.
	ProductLabel string
	// MemoryLabel is the node label holding memory per GPU in MiB,
	// nvidia.com/gpu.memory.
	MemoryLabel string
	// TaintKey is the taint GPU nodes carry, nvidia.com/gpu; GPU pods get a
	// toleration for it with operator Exists.
	TaintKey string
	// Allocation is how pods get GPUs when their settings do not say:
	// through the device plugin (the default) or a DRA claim.
	Allocation annotations.Allocation
	// DRA names the driver's device class, attributes and products the
	// claims select on.
	DRA gpuclaim.Options
}

// ProbeOptions are the serving probe presets per engine.
type ProbeOptions struct {
	Presets map[annotations.EngineName]ProbePreset
	// PeriodSeconds is the readiness and startup probes' period.
	PeriodSeconds int32
}

// ProbePreset is an engine's serving port and readiness path.
type ProbePreset struct {
	Port int32
	Path string
}

// Well-known names the mutators use.
const (
	// LoaderContainerName is the model-loader init container's name.
	LoaderContainerName = "model-loader"
	// ModelVolumeName is the shared volume holding the model.
	ModelVolumeName = "model-store"
)
