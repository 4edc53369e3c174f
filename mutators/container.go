package mutators

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
)

// NoContainer is Input.Container when the settings need no serving
// container (no model, GPU or engine).
const NoContainer = -1

// NeedsContainer reports whether the settings inject anything into a
// serving container.
func NeedsContainer(s annotations.Settings) bool {
	return s.Model != nil || s.GPU.Count > 0 || s.Serving.Engine != ""
}

// ResolveContainer picks the container that serves the model: the one named
// by modelgate.io/container; else the only container; else the only one
// that requests gpuResource. path is where the container annotation would
// be reported. It returns NoContainer when the settings need none.
func ResolveContainer(spec *corev1.PodSpec, s annotations.Settings, gpuResource corev1.ResourceName, path *field.Path) (int, *field.Error) {
	if !NeedsContainer(s) {
		return NoContainer, nil
	}
	names := make([]string, len(spec.Containers))
	for i, c := range spec.Containers {
		names[i] = c.Name
	}
	if s.Container != "" {
		for i, n := range names {
			if n == s.Container {
				return i, nil
			}
		}
		return NoContainer, field.NotFound(path.Key(annotations.Container),
			fmt.Sprintf("%s (containers: %s)", s.Container, strings.Join(names, ", ")))
	}
	if len(spec.Containers) == 1 {
		return 0, nil
	}
	found := NoContainer
	for i, c := range spec.Containers {
		if _, ok := c.Resources.Limits[gpuResource]; ok || hasQuantity(c.Resources.Requests, gpuResource) {
			if found != NoContainer {
				found = NoContainer
				break
			}
			found = i
		}
	}
	if found != NoContainer {
		return found, nil
	}
	return NoContainer, field.Required(path.Key(annotations.Container), fmt.Sprintf(
		"the pod has %d containers (%s) and none or several request %s: name the one that serves the model",
		len(names), strings.Join(names, ", "), gpuResource))
}

func hasQuantity(l corev1.ResourceList, name corev1.ResourceName) bool {
	_, ok := l[name]
	return ok
}
