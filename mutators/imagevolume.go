package mutators

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
)

// ImageVolumeOptions say which models are mounted as image volumes.
type ImageVolumeOptions struct {
	// All mounts every oci:// model as an image volume (the
	// Configuration's injection.loader.imageVolumes).
	All bool
	// Repositories are path.Match patterns of oci:// repositories
	// (registry/path) mounted as image volumes by default.
	Repositories []string
	// HubMirror is where `modelgate pack` puts Hugging Face models
	// (registry/prefix); empty: hf:// models are always loaded.
	HubMirror string
}

// imageVolume is the image volume the model is mounted from, nil when the
// model is not mounted that way: an oci:// model whose modelgate.io/
// model-mount says image-volume, or whose repository the Configuration
// mounts so (unless it says loader); an hf:// model whose model-mount says
// image-volume, from the Configuration's hub mirror. The pull policy is
// IfNotPresent for a digest or a commit (what they name never changes,
// and a node that has the image mounts it without asking the registry),
// Always for a tag or a branch. An hf:// model asked as an image volume
// without a hub mirror is an invalid object naming model-mount.
func imageVolume(m *annotations.ModelSettings, o ImageVolumeOptions, origin annotations.Origin) (*corev1.ImageVolumeSource, error) {
	if m.Delivery == annotations.DeliveryLoader || m.Delivery == annotations.DeliveryEngine {
		return nil, nil
	}
	u := m.URI
	switch u.Scheme {
	case annotations.SchemeOCI:
		if m.Delivery != annotations.DeliveryImageVolume && !o.All && !matchesAny(o.Repositories, u.Host+"/"+u.Path) {
			return nil, nil
		}
		v := &corev1.ImageVolumeSource{Reference: ociReference(u), PullPolicy: corev1.PullAlways}
		if u.Digest != "" {
			v.PullPolicy = corev1.PullIfNotPresent
		}
		return v, nil
	case annotations.SchemeHF:
		if m.Delivery != annotations.DeliveryImageVolume {
			return nil, nil
		}
		if o.HubMirror == "" {
			return nil, invalid(field.Invalid(origin.Path, string(annotations.DeliveryImageVolume),
				fmt.Sprintf("an hf:// model is mounted as an image volume from the Configuration's injection.imageVolumes.hubMirror, "+
					"which is not set; use an oci:// model packed with `modelgate pack`, or remove %s", annotations.ModelMount)))
		}
		ref, err := HubMirrorImage(o.HubMirror, u)
		if err != nil {
			return nil, invalid(field.Invalid(origin.Path, string(annotations.DeliveryImageVolume), err.Error()))
		}
		v := &corev1.ImageVolumeSource{Reference: ref, PullPolicy: corev1.PullAlways}
		if u.Pinned() {
			v.PullPolicy = corev1.PullIfNotPresent
		}
		return v, nil
	}
	return nil, nil
}

// HubMirrorImage is the image `modelgate pack` pushes a Hugging Face model
// to under the mirror: <mirror>/<org>/<name>:<revision>, the repository in
// lower case (OCI repositories are) and the revision main when none.
func HubMirrorImage(mirror string, u annotations.ModelURI) (string, error) {
	rev := u.Revision
	if rev == "" {
		rev = "main"
	}
	if !ociTag.MatchString(rev) {
		return "", fmt.Errorf("revision %q of %s cannot be an image tag in the hub mirror (letters, digits, '_', '.' and '-', at most 128)", rev, u.Path)
	}
	return strings.TrimSuffix(mirror, "/") + "/" + strings.ToLower(u.Path) + ":" + rev, nil
}

var ociTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func matchesAny(patterns []string, repo string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, repo); err == nil && ok {
			return true
		}
	}
	return false
}
