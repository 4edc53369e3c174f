package mutators

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
)

// userCacheVolume resolves modelgate.io/model-cache: "volume:<name>", a
// volume of the pod's own that the serving container already mounts as its
// model cache (a PVC, say): the loader mounts it as the serving container
// does, writable, and loads the model into the directory the serving
// container sees at modelgate.io/model-mount when that is set (it must be
// the mount's path or under it), else at the mount's path. It returns the
// loader's mount and that directory.
//
// The volume stays the user's: modelgate neither owns nor changes it, nor
// the serving container's mount of it.
func userCacheVolume(t *Target, in *Input, m *annotations.ModelSettings) (corev1.VolumeMount, string, error) {
	name := m.Cache.Volume
	spec := t.PodSpec
	c := &spec.Containers[in.Container]
	cache := in.Settings.Origin(annotations.ModelCache)
	bad := func(detail string) error {
		return invalid(field.Invalid(cache.Path, string(annotations.CacheVolume)+":"+name, detail))
	}

	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
	if i < 0 {
		names := make([]string, len(spec.Volumes))
		for j, v := range spec.Volumes {
			names[j] = v.Name
		}
		return corev1.VolumeMount{}, "", bad(fmt.Sprintf("the pod has no volume %q (volumes: %s)", name, orNone(names)))
	}
	if kind := readOnlyVolume(spec.Volumes[i]); kind != "" {
		return corev1.VolumeMount{}, "", bad(fmt.Sprintf("volume %q is %s, which the loader cannot write the model into", name, kind))
	}
	j := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == name })
	if j < 0 {
		return corev1.VolumeMount{}, "", bad(fmt.Sprintf(
			"container %q, which serves the model, does not mount volume %q; mount it where the engine reads its models", c.Name, name))
	}
	vm := c.VolumeMounts[j]
	dir := path.Clean(vm.MountPath)
	if in.Settings.Set(annotations.ModelMount) {
		want := m.MountPath
		if want != dir && !strings.HasPrefix(want, dir+"/") {
			o := in.Settings.Origin(annotations.ModelMount)
			return corev1.VolumeMount{}, "", invalid(field.Invalid(o.Path, want, fmt.Sprintf(
				"is not under %s, where container %q mounts volume %q (%s: \"%s:%s\"); set it to %s or a directory under it",
				dir, c.Name, name, annotations.ModelCache, annotations.CacheVolume, name, dir)))
		}
		dir = want
	}
	loader := corev1.VolumeMount{Name: name, MountPath: vm.MountPath, SubPath: vm.SubPath, SubPathExpr: vm.SubPathExpr}
	return loader, dir, nil
}

// readOnlyVolume describes a volume the loader cannot write into, empty
// for one it can.
func readOnlyVolume(v corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly:
		return "a read-only persistentVolumeClaim"
	case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
		return "a configMap, secret, downwardAPI or projected volume"
	case v.Image != nil:
		return "an image volume"
	case v.CSI != nil && v.CSI.ReadOnly != nil && *v.CSI.ReadOnly:
		return "a read-only csi volume"
	case v.NFS != nil && v.NFS.ReadOnly:
		return "a read-only nfs volume"
	}
	return ""
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// cacheVolumeOwnerWarning warns, for modelgate.io/model-cache:
// "volume:<name>" on a volume that keeps its files' owners (a claim, not
// an emptyDir) and for "pvc:<claim>", when the pod sets no fsGroup:
// modelgate's loader runs as a non-root user (65532 in modelgate's
// image), and a new claim's root directory, or a claim an engine running
// as root filled before, is root's and not writable by it (seen on the
// real node: the loader fails on permission denied). Empty otherwise.
func cacheVolumeOwnerWarning(spec *corev1.PodSpec, m *annotations.ModelSettings, o *Options) string {
	if o == nil || !needsLoader(m, o.Loader) {
		return ""
	}
	if spec.SecurityContext != nil && spec.SecurityContext.FSGroup != nil {
		return ""
	}
	var what string
	switch m.Cache.Medium {
	case annotations.CacheVolume:
		i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Cache.Volume })
		if i < 0 || spec.Volumes[i].EmptyDir != nil {
			return ""
		}
		what = fmt.Sprintf("volume %q (%s: \"%s:%s\")", m.Cache.Volume, annotations.ModelCache, annotations.CacheVolume, m.Cache.Volume)
	case annotations.CachePVC:
		what = fmt.Sprintf("claim %q (%s: \"%s:%s\")", m.Cache.Claim, annotations.ModelCache, annotations.CachePVC, m.Cache.Claim)
	default:
		return ""
	}
	return what + " keeps its files' owners and the pod sets no fsGroup: the loader runs as a non-root user (65532 in " +
		"modelgate's image) and cannot write into a claim whose directory is root's (a new claim's, or one a root engine " +
		"filled); set spec.securityContext.fsGroup (65532), or make the volume group-writable"
}
