package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/offline"
)

// maxAnnotationDepth bounds how deep modelgateAnnotations looks into an
// object: deep enough for a pod template inside a replica spec inside a
// cluster spec (a JobSet's is at depth 9), not a walk of any JSON at all.
const maxAnnotationDepth = 16

// injectedKinds are the kinds modelgate's mutating webhook injects: the
// resources of the markers in webhook/mutate.go.
const injectedKinds = "Pods (v1), Deployments and StatefulSets (apps/v1), Jobs and CronJobs (batch/v1)"

// annotationSite is where an object carries modelgate.io/ annotations.
type annotationSite struct {
	// Path is the annotations map's field path, for example
	// spec.template.metadata.annotations.
	Path string
	// Keys are its modelgate.io/ keys, sorted.
	Keys []string
}

// modelgateAnnotations finds the modelgate.io/ annotations anywhere in an
// object: in the metadata.annotations of the object itself and of every
// object nested in it (a pod template's, say), down to maxAnnotationDepth
// levels, in field order. JSON that does not decode has none.
func modelgateAnnotations(obj []byte) []annotationSite {
	var v any
	if err := json.Unmarshal(obj, &v); err != nil {
		return nil
	}
	var sites []annotationSite
	var walk func(v any, path *field.Path, depth int)
	walk = func(v any, path *field.Path, depth int) {
		if depth > maxAnnotationDepth {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				child := path.Child(k) // a root path when path is nil
				if k == "metadata" {
					if keys := prefixed(v[k]); len(keys) > 0 {
						sites = append(sites, annotationSite{Path: child.Child("annotations").String(), Keys: keys})
					}
				}
				walk(v[k], child, depth+1)
			}
		case []any:
			for i, item := range v {
				walk(item, path.Index(i), depth+1)
			}
		}
	}
	walk(v, nil, 0)
	return sites
}

// prefixed returns the sorted modelgate.io/ keys of a metadata map's
// annotations.
func prefixed(metadata any) []string {
	m, _ := metadata.(map[string]any)
	a, _ := m["annotations"].(map[string]any)
	var keys []string
	for k := range a {
		if strings.HasPrefix(k, annotations.Prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// writeUnhandledAnnotations warns, below an object's decision, that the
// modelgate.io/ annotations of an object of a kind modelgate does not
// inject do nothing to it, and where the pods it creates do get injected.
// It prints nothing when there are none.
func writeUnhandledAnnotations(w io.Writer, ti *offline.TypeInfo, sites []annotationSite) {
	if len(sites) == 0 {
		return
	}
	fmt.Fprintf(w, "  warning: %s %q (%s) is not a kind modelgate injects: its modelgate.io/ annotations have no effect on it\n",
		ti.Kind, ti.DisplayName(), ti.APIVersion)
	for _, s := range sites {
		fmt.Fprintf(w, "    %s: %s\n", s.Path, strings.Join(s.Keys, ", "))
	}
	fmt.Fprintf(w, "    modelgate injects only %s; pods created for it are injected only if they carry the annotations themselves or their namespace has %s=%s\n",
		injectedKinds, annotations.NamespaceInjection, annotations.InjectionEnabled)
}
