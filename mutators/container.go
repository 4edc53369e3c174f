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

// ResolveContainer picks the container that serves the model, the way a
// person reading the pod would:
//
//  1. the one modelgate.io/container names;
//  2. the only container;
//  3. when modelgate.io/engine names an engine, the only container whose
//     image or command line is the engine's (vllm/vllm-openai, vllm serve,
//     text-generation-launcher, ...), else the only one whose name
//     suggests it; of several such, the only one that requests gpuResource;
//  4. the only container that requests gpuResource.
//
// Only a pod where none of these singles one out is ambiguous. path is
// where the container annotation would be reported. It returns NoContainer
// when the settings need none.
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
	requestsGPU := func(i int) bool {
		c := &spec.Containers[i]
		return hasQuantity(c.Resources.Limits, gpuResource) || hasQuantity(c.Resources.Requests, gpuResource)
	}
	if e := s.Serving.Engine; e != "" {
		byStrength := [3][]int{}
		for i := range spec.Containers {
			m := matchesEngine(&spec.Containers[i], e)
			byStrength[m] = append(byStrength[m], i)
		}
		for _, matched := range [][]int{byStrength[2], byStrength[1]} {
			if len(matched) == 1 {
				return matched[0], nil
			}
			if i, ok := only(matched, requestsGPU); ok {
				return i, nil
			}
			if len(matched) > 1 {
				break // several look like the engine: the GPU count of others says nothing
			}
		}
	}
	all := make([]int, len(spec.Containers))
	for i := range all {
		all[i] = i
	}
	if i, ok := only(all, requestsGPU); ok {
		return i, nil
	}
	why := fmt.Sprintf("none or several request %s", gpuResource)
	if e := s.Serving.Engine; e != "" && e != annotations.EngineCustom {
		why = fmt.Sprintf("none or several run engine %q (by image, command or name) and %s", e, why)
	}
	return NoContainer, field.Required(path.Key(annotations.Container), fmt.Sprintf(
		"the pod has %d containers (%s) and %s: name the one that serves the model",
		len(names), strings.Join(names, ", "), why))
}

// only returns the one index in list for which keep is true.
func only(list []int, keep func(int) bool) (int, bool) {
	found := -1
	for _, i := range list {
		if !keep(i) {
			continue
		}
		if found >= 0 {
			return -1, false
		}
		found = i
	}
	return found, found >= 0
}

func hasQuantity(l corev1.ResourceList, name corev1.ResourceName) bool {
	_, ok := l[name]
	return ok
}
