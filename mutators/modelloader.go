package mutators

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// ModelLoaderName is the ModelLoader mutator's stable name.
const ModelLoaderName = "model-loader"

// Parts of the pod spec the model loader creates, as recorded in
// Record.Owns.
var (
	ownLoader = part(partInitContainer, LoaderContainerName)
	ownVolume = part(partVolume, ModelVolumeName)
)

// ModelLoader puts the model into the shared volume model-store and mounts
// it read-only into the serving container at the model mount path.
//
//   - pvc:// models mount the claim directly (read-only, with its sub
//     path): no loader.
//   - oci:// models become an image volume when modelgate.io/model-mount
//     says image-volume or the Configuration mounts their repository so,
//     and hf:// models when model-mount says image-volume, from the hub
//     mirror `modelgate pack` fills (see imageVolume): no loader.
//   - A model whose modelgate.io/model-mount says engine is the engine's
//     to read from its source: nothing is added, and what an earlier pass
//     added goes.
//   - Everything else gets an init container model-loader, after the
//     native sidecars the pod starts first and before its other init
//     containers (see placeLoader), fetching into the cache volume: an
//     emptyDir on disk or in memory (sized by modelgate.io/model-size), a
//     shared cache claim, where each model gets its own sub directory, or
//     a volume of the pod's own that the serving container already mounts
//     (see userCacheVolume), which stays the user's.
//
// With a memory cache, the loader's memory request and limit grow by
// modelgate.io/model-size (see loaderContainer). For an hf:// model that
// modelgate's loader fetches, the serving container gets HF_HUB_CACHE and
// HF_HUB_OFFLINE where it does not set them itself (see hfEnv).
//
// Credentials reach the loader only, as envFrom the named Secret. A
// model-loader init container the user wrote is kept as theirs; the volume
// and the serving mount are still wired.
//
// When the model is no longer named (the annotation removed, or the object
// opted out), the loader, volume and environment an earlier pass created
// go, with every mount of the volume; when the serving container changes,
// the mount and environment move.
type ModelLoader struct{}

var _ Mutator = ModelLoader{}

// Name implements Mutator.
func (ModelLoader) Name() string { return ModelLoaderName }

// Mutate implements Mutator.
func (ModelLoader) Mutate(t *Target, in *Input) (bool, error) {
	m := in.Settings.Model
	if m == nil || m.Delivery == annotations.DeliveryEngine {
		// Nothing of modelgate's delivers the model (model-mount: engine:
		// the engine reads it itself).
		return removeModel(t, in), nil
	}
	if in.Options == nil {
		return false, errNoOptions
	}
	c, err := servingContainer(t, in)
	if err != nil {
		return false, err
	}
	spec := t.PodSpec
	// An image volume that cannot be had is refused before anything
	// changes.
	img, err := imageVolume(m, in.Options.Loader.ImageVolumes, in.Settings.Origin(annotations.ModelMount))
	if err != nil {
		return false, err
	}
	loads := m.URI.Scheme != annotations.SchemePVC && img == nil

	changed := releaseMounts(t, in, c.Name)
	var (
		loaderMount *corev1.VolumeMount
		subPath     string
	)
	if m.Cache.Medium == annotations.CacheVolume && loads {
		// The pod's own volume: the model goes where the serving container
		// already mounts it, and modelgate adds no volume or mount of its own.
		vm, dir, err := userCacheVolume(t, in, m)
		if err != nil {
			return false, err
		}
		changed = removeModelVolume(t, in) || changed
		resolved := *m
		resolved.MountPath = dir
		m, loaderMount = &resolved, &vm
	} else {
		var volume corev1.Volume
		volume, subPath = modelVolume(m, img)
		v, err := ensureVolume(t, in, volume)
		if err != nil {
			return false, err
		}
		changed = v || changed
		mount := corev1.VolumeMount{Name: ModelVolumeName, MountPath: m.MountPath, SubPath: subPath, ReadOnly: true}
		v, err = ensureMount(t, in, c, mount)
		if err != nil {
			return false, err
		}
		t.Own(part(partVolumeMount, c.Name, ModelVolumeName))
		changed = v || changed
	}

	idx := slices.IndexFunc(spec.InitContainers, isLoader)
	ours := idx >= 0 && in.Previous.Owned(ownLoader)
	// The serving environment describes the layout of modelgate's loader;
	// a loader the user wrote lays out what it likes.
	var env []corev1.EnvVar
	// An image `modelgate pack` made of a Hub model is laid out as the
	// loader lays out the Hub's cache.
	if (loads && (idx < 0 || ours) || img != nil) && m.URI.Scheme == annotations.SchemeHF {
		env = withoutUsersCache(in, c, hfEnv(m))
	}
	changed = setEnv(t, in, c, env) || changed

	switch {
	case idx >= 0 && !ours:
		// The user's own loader: theirs to run, never touched.
	case !loads:
		if ours {
			spec.InitContainers = deleteAt(spec.InitContainers, idx)
			changed = true
		}
	default:
		want := loaderContainer(m, in.Options.Loader, subPath)
		if loaderMount != nil {
			want.VolumeMounts = []corev1.VolumeMount{*loaderMount}
		}
		t.Own(ownLoader)
		changed = placeLoader(spec, idx, want) || changed
	}
	return changed, nil
}

// placeLoader puts the loader want among the init containers, replacing
// the one at idx (-1: none yet): after the native sidecars the pod starts
// first (init containers with restartPolicy Always, such as a mesh proxy
// or a gcsfuse sidecar, which the download may need and which start in
// order, each before the next init container), and before every ordinary
// init container, so that those find the model in place. It reports
// whether the init containers changed.
func placeLoader(spec *corev1.PodSpec, idx int, want corev1.Container) bool {
	others := spec.InitContainers
	if idx >= 0 {
		others = slices.Delete(slices.Clone(others), idx, idx+1)
	}
	at := 0
	for at < len(others) && isNativeSidecar(others[at]) {
		at++
	}
	if idx == at && equality.Semantic.DeepEqual(spec.InitContainers[idx], want) {
		return false
	}
	spec.InitContainers = slices.Insert(slices.Clone(others), at, want)
	return true
}

// isNativeSidecar reports whether an init container is a native sidecar:
// one that keeps running beside the app containers.
func isNativeSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func isLoader(c corev1.Container) bool { return c.Name == LoaderContainerName }

// removeModel takes out what an earlier pass created for a model no longer
// named: the serving environment, the loader, and the model-store volume with every mount of it (a
// mount of a volume the pod lacks would make the object invalid, so this
// includes mounts the user added to modelgate's volume).
func removeModel(t *Target, in *Input) bool {
	spec := t.PodSpec
	changed := releaseEnv(t, in, nil)
	if i := slices.IndexFunc(spec.InitContainers, isLoader); i >= 0 && in.Previous.Owned(ownLoader) {
		spec.InitContainers = deleteAt(spec.InitContainers, i)
		changed = true
	}
	return removeModelVolume(t, in) || changed
}

// removeModelVolume takes out the model-store volume an earlier pass
// created, with every mount of it.
func removeModelVolume(t *Target, in *Input) bool {
	spec := t.PodSpec
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == ModelVolumeName })
	if i < 0 || !in.Previous.Owned(ownVolume) {
		return false
	}
	spec.Volumes = deleteAt(spec.Volumes, i)
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for j := range list {
			list[j].VolumeMounts = withoutModelMount(list[j].VolumeMounts)
		}
	}
	return true
}

// releaseMounts removes the model mounts an earlier pass gave containers
// other than the serving one (the serving container changed).
func releaseMounts(t *Target, in *Input, serving string) bool {
	changed := false
	for _, rest := range in.Previous.ownedOf(partVolumeMount) {
		name, _, _ := strings.Cut(rest, "/")
		if name == serving {
			continue
		}
		if c := containerNamed(t.PodSpec, name); c != nil {
			before := len(c.VolumeMounts)
			c.VolumeMounts = withoutModelMount(c.VolumeMounts)
			changed = changed || len(c.VolumeMounts) != before
		}
	}
	return changed
}

// withoutModelMount returns the mounts without those of model-store, as a
// new slice (the caller's snapshot may share the old one's array), nil when
// none are left.
func withoutModelMount(mounts []corev1.VolumeMount) []corev1.VolumeMount {
	if !slices.ContainsFunc(mounts, isModelMount) {
		return mounts
	}
	out := slices.DeleteFunc(slices.Clone(mounts), isModelMount)
	if len(out) == 0 {
		return nil
	}
	return out
}

func isModelMount(vm corev1.VolumeMount) bool { return vm.Name == ModelVolumeName }

// deleteAt removes element i, returning nil rather than an empty list, so
// that a list modelgate created and emptied again is absent, as before.
func deleteAt[T any](list []T, i int) []T {
	list = slices.Delete(list, i, i+1)
	if len(list) == 0 {
		return nil
	}
	return list
}

// needsLoader reports whether a loader fills the model's volume: not for
// a pvc:// model, mounted directly, a model mounted as an image volume,
// nor one the engine reads itself.
func needsLoader(m *annotations.ModelSettings, o LoaderOptions) bool {
	if m.URI.Scheme == annotations.SchemePVC || m.Delivery == annotations.DeliveryEngine {
		return false
	}
	v, err := imageVolume(m, o.ImageVolumes, annotations.Origin{})
	return v == nil && err == nil
}

// modelVolume returns the model-store volume and the sub path serving
// containers mount: the image volume img when there is one (see
// imageVolume). (A "volume:<name>" cache has none: see userCacheVolume.)
func modelVolume(m *annotations.ModelSettings, img *corev1.ImageVolumeSource) (corev1.Volume, string) {
	v := corev1.Volume{Name: ModelVolumeName}
	if m.URI.Scheme == annotations.SchemePVC {
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.URI.Claim, ReadOnly: true}
		return v, m.URI.Path
	}
	if img != nil {
		v.Image = img
		return v, ""
	}
	switch m.Cache.Medium {
	case annotations.CachePVC:
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: m.Cache.Claim}
		return v, cacheSubPath(m.URI)
	case annotations.CacheMemory:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: copyQuantity(m.Size)}
	default:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{SizeLimit: copyQuantity(m.Size)}
	}
	return v, ""
}

// cacheSubPath gives each model its own directory in a shared cache claim.
func cacheSubPath(u annotations.ModelURI) string {
	sum := sha256.Sum256([]byte(u.Raw))
	return "models/" + hex.EncodeToString(sum[:8])
}

func ociReference(u annotations.ModelURI) string {
	ref := u.Host + "/" + u.Path
	if u.Digest != "" {
		return ref + "@" + u.Digest
	}
	return ref + ":" + u.Tag
}

func copyQuantity(q *resource.Quantity) *resource.Quantity {
	if q == nil {
		return nil
	}
	c := q.DeepCopy()
	return &c
}

// ensureVolume adds or updates model-store. A model-store volume that
// modelgate did not create is the user's name clash: an invalid object.
func ensureVolume(t *Target, in *Input, want corev1.Volume) (bool, error) {
	spec := t.PodSpec
	idx := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == ModelVolumeName })
	if idx >= 0 && !in.Previous.Owned(ownVolume) {
		return false, invalid(field.Duplicate(t.specPath().Child("volumes").Key(ModelVolumeName).Child("name"),
			fmt.Sprintf("volume name %q is reserved for the model modelgate injects; rename this volume", ModelVolumeName)))
	}
	t.Own(ownVolume)
	if idx < 0 {
		spec.Volumes = append(spec.Volumes, want)
		return true, nil
	}
	if equality.Semantic.DeepEqual(spec.Volumes[idx], want) {
		return false, nil
	}
	spec.Volumes[idx] = want
	return true, nil
}

// ensureMount adds or updates the serving container's model mount. Another
// mount at the same path is the user's clash: an invalid object, reported
// on what the user wrote (modelgate.io/model-mount when they set it, else
// their own mount) with the ways out.
func ensureMount(t *Target, in *Input, c *corev1.Container, want corev1.VolumeMount) (bool, error) {
	for i, vm := range c.VolumeMounts {
		switch {
		case vm.Name == want.Name:
			if equality.Semantic.DeepEqual(vm, want) {
				return false, nil
			}
			c.VolumeMounts[i] = want
			return true, nil
		case vm.MountPath == want.MountPath:
			return false, invalid(mountClash(t, in, c, i))
		}
	}
	c.VolumeMounts = append(c.VolumeMounts, want)
	return true, nil
}

// mountClash reports the serving container's own mount i at the path
// where modelgate would mount the model.
func mountClash(t *Target, in *Input, c *corev1.Container, i int) *field.Error {
	vm := c.VolumeMounts[i]
	reuse := fmt.Sprintf("%s: \"%s:%s\" to load the model into that volume", annotations.ModelCache, annotations.CacheVolume, vm.Name)
	if in.Settings.Set(annotations.ModelMount) {
		o := in.Settings.Origin(annotations.ModelMount)
		detail := fmt.Sprintf("container %q already mounts volume %q at %s; set %s to another path, or %s",
			c.Name, vm.Name, vm.MountPath, annotations.ModelMount, reuse)
		if o.Profile != "" {
			detail = fmt.Sprintf("profile %q sets %s to %s, where container %q already mounts volume %q; set %s to another path, or %s",
				o.Profile, annotations.ModelMount, vm.MountPath, c.Name, vm.Name, annotations.ModelMount, reuse)
		}
		return field.Invalid(o.Path, vm.MountPath, detail)
	}
	ci := slices.IndexFunc(t.PodSpec.Containers, func(x corev1.Container) bool { return x.Name == c.Name })
	return field.Invalid(t.containerPath(ci).Child("volumeMounts").Index(i).Child("mountPath"), vm.MountPath, fmt.Sprintf(
		"container %q mounts volume %q at %s, where modelgate mounts the model by default; set %s to another path, or %s",
		c.Name, vm.Name, vm.MountPath, annotations.ModelMount, reuse))
}

// LoaderDefaultEnvPrefix names the Configuration's loader environment in
// the Pod: injection.loader.env's HF_ENDPOINT is the loader's
// MODELGATE_DEFAULT_HF_ENDPOINT, which `modelgate load` takes as
// HF_ENDPOINT only where the Pod does not set HF_ENDPOINT (the
// credentials Secret's keys, a mapped key). Written as HF_ENDPOINT, it
// would win over the user's Secret (Kubernetes puts env over envFrom).
const LoaderDefaultEnvPrefix = "MODELGATE_DEFAULT_"

// loaderContainer builds the model-loader init container: the scheme's
// loader, else the default one (LoaderOptions), with its arguments (see
// loaderArgs) and security context (loaderSecurityContext), and the
// credentials of credentialEnv.
func loaderContainer(m *annotations.ModelSettings, o LoaderOptions, subPath string) corev1.Container {
	img := LoaderImage{Image: o.Image, Command: o.Command, Args: o.Args, SecurityContext: o.SecurityContext}
	env := make([]corev1.EnvVar, len(o.Env))
	for i, v := range o.Env {
		env[i] = corev1.EnvVar{Name: LoaderDefaultEnvPrefix + v.Name, Value: v.Value}
	}
	if s, ok := o.Schemes[m.URI.Scheme]; ok {
		img, env = s, nil
	}
	envFrom, credEnv := credentialEnv(m)
	c := corev1.Container{
		Name:            LoaderContainerName,
		Image:           img.Image,
		ImagePullPolicy: o.PullPolicy,
		Command:         slices.Clone(img.Command),
		Args:            loaderArgs(img.Args, m),
		Resources:       *o.Resources.DeepCopy(),
		VolumeMounts: []corev1.VolumeMount{{
			Name: ModelVolumeName, MountPath: m.MountPath, SubPath: subPath,
		}},
		SecurityContext: loaderSecurityContext(img.SecurityContext),
		// Spelled out where the API server would default them, so that the
		// stored container equals a freshly built one and a second pass
		// changes nothing.
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// The loader's identity in a shared cache's lock: the Pod, not the
		// host name, which hostNetwork Pods share with the node. It comes
		// first, the Configuration's defaults next (LoaderDefaultEnvPrefix),
		// the mapped credentials last.
		Env: slices.Concat([]corev1.EnvVar{{Name: config.LoaderPodUIDEnv, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.uid"},
		}}}, env, credEnv),
		EnvFrom: envFrom,
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if m.Size != nil && m.Cache.Medium == annotations.CacheDisk {
		// The fetched model fills the pod's ephemeral storage: ask for it,
		// so the scheduler picks a node with the room.
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[corev1.ResourceEphemeralStorage] = m.Size.DeepCopy()
	}
	if m.Size != nil && m.Cache.Medium == annotations.CacheMemory {
		// The model is written to tmpfs: its pages are charged to the
		// loader's memory while it runs, and to the pod's for as long as
		// the pod lives. A limit grows by the size, so that writing the
		// model does not kill the loader; the request grows by it too, so
		// the scheduler reserves the room (a pod's request is at least its
		// largest init container's, for its whole life).
		addQuantity(&c.Resources.Requests, corev1.ResourceMemory, *m.Size)
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			addQuantity(&c.Resources.Limits, corev1.ResourceMemory, *m.Size)
		}
	}
	return c
}

// addQuantity adds q to l[name], which it creates (from zero) when absent.
func addQuantity(l *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	if *l == nil {
		*l = corev1.ResourceList{}
	}
	sum := (*l)[name].DeepCopy()
	sum.Add(q)
	(*l)[name] = sum
}
