package audit

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultPageSize is how many objects List reads per request.
const DefaultPageSize = 250

// List calls each with every workload of the kinds the audit judges, in
// the namespace (every namespace when empty), as JSON without its
// managedFields, reading pageSize objects per request from r (paginated
// reads from the API server hold one page in memory, not the cluster).
// It stops at the first error of each.
func List(ctx context.Context, r client.Reader, namespace string, pageSize int64, each func(raw []byte) error) error {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	for _, k := range Kinds() {
		gv, err := schema.ParseGroupVersion(k[0])
		if err != nil {
			return err
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gv.WithKind(k[1] + "List"))
		base := []client.ListOption{client.Limit(pageSize)}
		if namespace != "" {
			base = append(base, client.InNamespace(namespace))
		}
		for token := ""; ; {
			opts := base
			if token != "" {
				opts = append(slices.Clone(base), client.Continue(token))
			}
			if err := r.List(ctx, list, opts...); err != nil {
				return fmt.Errorf("listing %s: %w", k[1], err)
			}
			for i := range list.Items {
				u := &list.Items[i]
				u.SetAPIVersion(k[0])
				u.SetKind(k[1])
				u.SetManagedFields(nil)
				raw, err := u.MarshalJSON()
				if err != nil {
					return fmt.Errorf("encoding %s %s/%s: %w", k[1], u.GetNamespace(), u.GetName(), err)
				}
				if err := each(raw); err != nil {
					return err
				}
			}
			if token = list.GetContinue(); token == "" {
				break
			}
		}
	}
	return nil
}
