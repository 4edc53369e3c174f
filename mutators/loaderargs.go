package mutators

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// loaderArgs are the loader's arguments: the template with its
// placeholders replaced, or, without a template (nil), --uri=<uri>
// --dest=<dest> for `modelgate load`. Replacement is one pass: text a
// placeholder brings in (a URI holding "{{dest}}") is not replaced again.
func loaderArgs(template []string, m *annotations.ModelSettings) []string {
	if template == nil {
		return []string{"--uri=" + m.URI.Raw, "--dest=" + m.MountPath}
	}
	r := strings.NewReplacer(config.ArgURI, m.URI.Raw, config.ArgDest, m.MountPath)
	out := make([]string, len(template))
	for i, a := range template {
		out[i] = r.Replace(a)
	}
	return out
}

// loaderSecurityContext is the security context a loader gets from its
// setting: the default when nil, none when empty ({}: the Pod's and the
// image's own settings apply), else a copy of it.
func loaderSecurityContext(sc *corev1.SecurityContext) *corev1.SecurityContext {
	switch {
	case sc == nil:
		return config.DefaultLoaderSecurityContext()
	case *sc == (corev1.SecurityContext{}):
		return nil
	default:
		return sc.DeepCopy()
	}
}
