// Package render builds kustomizations as `kustomize build` would, with
// kustomize's own library (krusty), and returns their objects. hack/helmchart
// renders config/ with it, and the harnesses and suites under test/ use it,
// so that the chart, the tests and `make run` read the same YAML.
package render

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Render builds a kustomization directory, as `kustomize build` would, and
// returns its objects.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	return RenderFS(filesys.MakeFsOnDisk(), dir)
}

// RenderFS is Render on a file system of the caller's (an edited copy of
// config/ in memory, say).
//
//nolint:revive // the name pairs it with Render, as its callers read them side by side.
func RenderFS(fsys filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", dir, err)
	}
	out := make([]*unstructured.Unstructured, 0, resMap.Size())
	for _, r := range resMap.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("rendering %s/%s: %w", r.GetKind(), r.GetName(), err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(y, &u.Object); err != nil {
			return nil, fmt.Errorf("decoding %s/%s: %w", r.GetKind(), r.GetName(), err)
		}
		out = append(out, u)
	}
	return out, nil
}
