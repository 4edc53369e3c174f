package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
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

// LoaderPodUIDEnv is the loader's environment variable holding its Pod's
// UID (`modelgate load` reads it: docs/loader.md). The loader's env may
// not set it (validate_injection.go).
const LoaderPodUIDEnv = "MODELGATE_POD_UID"

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

// NVIDIA's names, the GPU defaults: the device plugin's extended resource,
// the product and memory labels of GPU Feature Discovery (memory per GPU in
// MiB, as NVML reports it: an "80GB" card is labelled a little under 81920)
// and the taint GPU node pools usually carry.
const (
	DefaultGPUResourceName = "nvidia.com/gpu"
	DefaultGPUProductLabel = "nvidia.com/gpu.product"
	DefaultGPUMemoryLabel  = "nvidia.com/gpu.memory"
	DefaultGPUTaintKey     = "nvidia.com/gpu"
)

// DefaultProbePeriodSeconds is the probes' period when the Configuration
// leaves injection.probes.periodSeconds zero.
const DefaultProbePeriodSeconds int32 = 5
