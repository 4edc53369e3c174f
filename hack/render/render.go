package env

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Render builds a kustomization directory, as `kustomize build` would, and
// returns its objects.
func Render(dir string) ([]*unstructured.Unstructured, error) {
	return renderFS(filesys.MakeFsOnDisk(), dir)
}

// renderFS is Render on a file system of the caller's (an edited copy of
// config/ in memory, say).
func renderFS(fsys filesys.FileSystem, dir string) ([]*unstructured.Unstructured, error) {
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

// Apply server-side applies every object of a kustomization directory.
func Apply(ctx context.Context, c client.Client, dir string) error {
	objs, err := Render(dir)
	if err != nil {
		return err
	}
	return applyObjects(ctx, c, objs)
}

// applyObjects server-side applies rendered objects.
func applyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		//nolint:staticcheck // client.Apply on unstructured objects is the plain way to apply rendered YAML.
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("modelgate-env"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
