package webhook

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceLabeler returns a namespace's labels. The webhook's
// implementation reads the manager's cache and never calls the API server.
type NamespaceLabeler interface {
	NamespaceLabels(ctx context.Context, name string) (map[string]string, error)
}

// cachedNamespaces reads namespace metadata from a cache-backed reader.
type cachedNamespaces struct {
	reader client.Reader
	// wait bounds how long a lookup waits for a namespace that has not
	// reached the cache yet (it was created a moment before the object).
	wait time.Duration
	// poll is the interval between looks while waiting.
	poll time.Duration
}

var _ NamespaceLabeler = (*cachedNamespaces)(nil)

// newNamespaceMeta returns an empty metadata-only Namespace, the form the
// cache holds (a metadata informer: no spec or status is ever stored).
func newNamespaceMeta() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// NamespaceLabels implements NamespaceLabeler.
func (c *cachedNamespaces) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	deadline := time.Now().Add(c.wait)
	for {
		ns := newNamespaceMeta()
		err := c.reader.Get(ctx, types.NamespacedName{Name: name}, ns)
		if err == nil {
			return ns.Labels, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading namespace %q from cache: %w", name, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("namespace %q: %w", name, errNamespaceNotCached)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("namespace %q: %w", name, ctx.Err())
		case <-time.After(c.poll):
		}
	}
}
