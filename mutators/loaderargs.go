package mutators

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
)

// The placeholders of a loader's args template (LoaderImage.Args): the
// model URI as written in modelgate.io/model, and the directory the loader
// fills (the model mount path, where the loader mounts the model volume).
const (
	ArgURI  = "{{uri}}"
	ArgDest = "{{dest}}"
)

// loaderArgPlaceholders are the placeholders an args template may use, in
// the order messages list them.
var loaderArgPlaceholders = []string{ArgURI, ArgDest}

// CheckLoaderArgs checks an args template: every "{{" opens one of
// ArgURI and ArgDest, and some argument uses ArgURI (the loader has no
// other way to learn the model). With an error, it returns the index of
// the argument at fault, -1 when the fault is the whole list.
func CheckLoaderArgs(args []string) (int, error) {
	for i, a := range args {
		if err := checkLoaderArg(a); err != nil {
			return i, err
		}
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, ArgURI) }) {
		return -1, fmt.Errorf("must use %s in at least one argument: the loader has no other way to learn the model", ArgURI)
	}
	return -1, nil
}

// checkLoaderArg checks that every "{{" of one argument opens a known
// placeholder.
func checkLoaderArg(a string) error {
	for rest := a; ; {
		i := strings.Index(rest, "{{")
		if i < 0 {
			return nil
		}
		rest = rest[i:]
		end := strings.Index(rest, "}}")
		if end < 0 {
			return fmt.Errorf("has a %q that does not close: the placeholders are %s", "{{", strings.Join(loaderArgPlaceholders, " and "))
		}
		if p := rest[:end+2]; !slices.Contains(loaderArgPlaceholders, p) {
			return fmt.Errorf("unknown placeholder %s: the placeholders are %s", p, strings.Join(loaderArgPlaceholders, " and "))
		}
		rest = rest[end+2:]
	}
}

// loaderArgs are the loader's arguments: the template with its
// placeholders replaced, or, without a template (nil), --uri=<uri>
// --dest=<dest> for `modelgate load`. Replacement is one pass: text a
// placeholder brings in (a URI holding "{{dest}}") is not replaced again.
func loaderArgs(template []string, m *annotations.ModelSettings) []string {
	if template == nil {
		return []string{"--uri=" + m.URI.Raw, "--dest=" + m.MountPath}
	}
	r := strings.NewReplacer(ArgURI, m.URI.Raw, ArgDest, m.MountPath)
	out := make([]string, len(template))
	for i, a := range template {
		out[i] = r.Replace(a)
	}
	return out
}

// DefaultLoaderSecurityContext is the loader's security context unless the
// Configuration sets another: the restricted Pod Security Standard's (non
// root, no privilege escalation, every capability dropped, the
// RuntimeDefault seccomp profile) and a read-only root filesystem, which
// modelgate's own loader runs under.
func DefaultLoaderSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// loaderSecurityContext is the security context a loader gets from its
// setting: the default when nil, none when empty ({}: the Pod's and the
// image's own settings apply), else a copy of it.
func loaderSecurityContext(sc *corev1.SecurityContext) *corev1.SecurityContext {
	switch {
	case sc == nil:
		return DefaultLoaderSecurityContext()
	case *sc == (corev1.SecurityContext{}):
		return nil
	default:
		return sc.DeepCopy()
	}
}
