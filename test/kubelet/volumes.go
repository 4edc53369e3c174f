package kubelet

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podVolumes are a Pod's volumes the stand-in provides, by name, and the
// kind of those it does not.
type podVolumes struct {
	host        map[string]string
	unsupported map[string]string
}

func (v podVolumes) hostDirs() map[string]string {
	out := make(map[string]string, len(v.host))
	for k, d := range v.host {
		out[k] = d
	}
	return out
}

func podDir(dir string, pod *corev1.Pod) string {
	return filepath.Join(dir, "pods", string(pod.UID))
}

// volumeDirs maps the Pod's volumes to host directories (see
// Result.Volumes) without creating anything.
func volumeDirs(dir string, pod *corev1.Pod) podVolumes {
	v := podVolumes{host: map[string]string{}, unsupported: map[string]string{}}
	vdir := filepath.Join(podDir(dir, pod), "volumes")
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.EmptyDir != nil:
			v.host[vol.Name] = filepath.Join(vdir, "kubernetes.io~empty-dir", vol.Name)
		case vol.PersistentVolumeClaim != nil:
			v.host[vol.Name] = filepath.Join(dir, "claims", pod.Namespace, vol.PersistentVolumeClaim.ClaimName)
		case vol.ConfigMap != nil:
			v.host[vol.Name] = filepath.Join(vdir, "kubernetes.io~configmap", vol.Name)
		case vol.Secret != nil:
			v.host[vol.Name] = filepath.Join(vdir, "kubernetes.io~secret", vol.Name)
		default:
			v.unsupported[vol.Name] = volumeKind(vol)
		}
	}
	return v
}

// setUpVolumes creates the Pod's volumes: emptyDirs and claims as
// directories (kept from run to run), configMaps and secrets written from
// the API as the kubelet projects them (a missing optional one is empty).
func setUpVolumes(ctx context.Context, c client.Reader, pod *corev1.Pod, dir string) (podVolumes, error) {
	v := volumeDirs(dir, pod)
	for _, vol := range pod.Spec.Volumes {
		host, ok := v.host[vol.Name]
		if !ok {
			continue
		}
		var err error
		switch {
		case vol.ConfigMap != nil:
			err = projectConfigMap(ctx, c, pod.Namespace, vol.ConfigMap, host)
		case vol.Secret != nil:
			err = projectSecret(ctx, c, pod.Namespace, vol.Secret, host)
		default:
			err = os.MkdirAll(host, 0o750)
		}
		if err != nil {
			return v, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
	}
	return v, nil
}

func projectConfigMap(ctx context.Context, c client.Reader, ns string, src *corev1.ConfigMapVolumeSource, host string) error {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.Name}, cm)
	if apierrors.IsNotFound(err) && isTrue(src.Optional) {
		return project(host, nil, nil, src.Optional)
	}
	if err != nil {
		return fmt.Errorf("configMap %q: %w", src.Name, err)
	}
	data := map[string][]byte{}
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		data[k] = b
	}
	return project(host, data, src.Items, src.Optional)
}

func projectSecret(ctx context.Context, c client.Reader, ns string, src *corev1.SecretVolumeSource, host string) error {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.SecretName}, s)
	if apierrors.IsNotFound(err) && isTrue(src.Optional) {
		return project(host, nil, nil, src.Optional)
	}
	if err != nil {
		return fmt.Errorf("secret %q: %w", src.SecretName, err)
	}
	return project(host, s.Data, src.Items, src.Optional)
}

// project writes keys as files: every key, or only the items (a missing
// item's key is an error unless the source is optional).
func project(host string, data map[string][]byte, items []corev1.KeyToPath, optional *bool) error {
	if err := os.RemoveAll(host); err != nil {
		return err
	}
	if err := os.MkdirAll(host, 0o750); err != nil {
		return err
	}
	if len(items) == 0 {
		for _, k := range sortedKeys(data) {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if isTrue(optional) {
				continue
			}
			return fmt.Errorf("no key %q", it.Key)
		}
		p, err := underDir(host, it.Path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func volumeKind(v corev1.Volume) string {
	switch {
	case v.HostPath != nil:
		return "hostPath"
	case v.Projected != nil:
		return "projected"
	case v.DownwardAPI != nil:
		return "downwardAPI"
	case v.Image != nil:
		return "image"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.CSI != nil:
		return "csi"
	default:
		return "this kind of"
	}
}

// containerMounts are a container's mounts on the host, longest mount path
// first. env expands subPathExpr.
func containerMounts(ctr *corev1.Container, vols podVolumes, env []envVar) ([]Mount, error) {
	var out []Mount
	for _, vm := range ctr.VolumeMounts {
		host, ok := vols.host[vm.Name]
		if !ok {
			if kind, ok := vols.unsupported[vm.Name]; ok {
				return nil, fmt.Errorf("mount %s: %s volume %q is not supported by the stand-in", vm.MountPath, kind, vm.Name)
			}
			return nil, fmt.Errorf("mount %s: the pod has no volume %q", vm.MountPath, vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, mappingOf(env))
		}
		if sub != "" {
			h, err := underDir(host, sub)
			if err != nil {
				return nil, fmt.Errorf("mount %s: sub path: %w", vm.MountPath, err)
			}
			host = h
		}
		if !path.IsAbs(vm.MountPath) {
			return nil, fmt.Errorf("mount path %q is not absolute", vm.MountPath)
		}
		out = append(out, Mount{Path: path.Clean(vm.MountPath), Host: host, ReadOnly: vm.ReadOnly})
	}
	sortMounts(out)
	return out, nil
}

// sortMounts puts the longest mount path first, so that a nested mount
// wins over the one it is in.
func sortMounts(ms []Mount) {
	slices.SortStableFunc(ms, func(a, b Mount) int { return len(b.Path) - len(a.Path) })
}

// underDir joins a relative path below dir, refusing one that is absolute
// or climbs out (as the API server and the kubelet refuse such sub paths).
func underDir(dir, rel string) (string, error) {
	if rel == "" || path.IsAbs(rel) || slices.Contains(strings.Split(rel, "/"), "..") {
		return "", fmt.Errorf("%q must be a relative path without '..'", rel)
	}
	return filepath.Join(dir, filepath.FromSlash(rel)), nil
}

// translate rewrites a container path under one of the mounts to the host
// directory behind it.
func translate(p string, mounts []Mount) (string, bool) {
	if !path.IsAbs(p) {
		return "", false
	}
	for _, m := range mounts {
		if m.Path == "/" {
			return filepath.Join(m.Host, filepath.FromSlash(p)), true
		}
		if rest, ok := strings.CutPrefix(p, m.Path); ok && (rest == "" || rest[0] == '/') {
			return m.Host + filepath.FromSlash(rest), true
		}
	}
	return "", false
}

// translateArg translates an argument that is a path under a mount, or a
// flag whose value (after the first '=') is.
func translateArg(a string, mounts []Mount) string {
	if h, ok := translate(a, mounts); ok {
		return h
	}
	if strings.HasPrefix(a, "-") {
		if flag, value, ok := strings.Cut(a, "="); ok {
			if h, ok := translate(value, mounts); ok {
				return flag + "=" + h
			}
		}
	}
	return a
}

// HostPath translates a path as a container of the Pod sees it to the host
// path behind it, through that container's mounts and the volumes of r (a
// Result of Run for any container of the same Pod, with the same
// Options.Dir). A subPathExpr is expanded from the container's env values
// alone. A path under no mount is ErrNotMounted.
func HostPath(pod *corev1.Pod, container, p string, r *Result) (string, error) {
	ctr, err := findContainer(pod, container)
	if err != nil {
		return "", err
	}
	env, _ := literalEnv(ctr)
	vols := podVolumes{host: r.Volumes, unsupported: map[string]string{}}
	mounts, err := containerMounts(ctr, vols, env)
	if err != nil {
		return "", fmt.Errorf("container %q of pod %s: %w", container, pod.Name, err)
	}
	h, ok := translate(path.Clean(p), mounts)
	if !ok {
		return "", fmt.Errorf("path %s in container %q of pod %s: %w", p, container, pod.Name, ErrNotMounted)
	}
	return h, nil
}
