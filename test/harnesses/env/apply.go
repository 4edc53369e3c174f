package env

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/hack/render"
)

// Apply server-side applies every object of a kustomization directory.
func Apply(ctx context.Context, c client.Client, dir string) error {
	objs, err := render.Render(dir)
	if err != nil {
		return err
	}
	return ApplyObjects(ctx, c, objs)
}

// ApplyObjects server-side applies rendered objects (render.Render's, say),
// as `kubectl apply --server-side --force-conflicts` would.
func ApplyObjects(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		//nolint:staticcheck // client.Apply on unstructured objects is the plain way to apply rendered YAML.
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("modelgate-env"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
