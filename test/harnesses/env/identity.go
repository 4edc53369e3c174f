package env

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/modelgate/modelgate/hack/render"
)

// Namespace and ServiceAccount are where config/ installs modelgate.
const (
	Namespace      = "modelgate-system"
	ServiceAccount = "modelgate"
)

// ModelgateIdentity installs modelgate's namespace and RBAC from
// config/rbac, and from the extra kustomizations (relative to root, such
// as config/self-managed/rbac), and returns a client configuration that
// authenticates as modelgate's service account, so that modelgate runs
// with exactly the permissions a cluster grants it and a missing one fails
// the tests. It returns once the API server's authorizer grants the
// service account every permission those kustomizations give it: RBAC is
// read from informers, and modelgate started a moment too early would find
// its first lists refused and back off for seconds.
func ModelgateIdentity(ctx context.Context, te *envtest.Environment, admin client.Client, root string, extra ...string) (*envtest.AuthenticatedUser, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if err := admin.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	var applied []*unstructured.Unstructured
	for _, dir := range append([]string{filepath.Join("config", "rbac")}, extra...) {
		objs, err := render.Render(filepath.Join(root, dir))
		if err != nil {
			return nil, err
		}
		if err := ApplyObjects(ctx, admin, objs); err != nil {
			return nil, err
		}
		applied = append(applied, objs...)
	}
	name, groups := "system:serviceaccount:"+Namespace+":"+ServiceAccount, ServiceAccountGroups(Namespace)
	if err := WaitForPermissions(ctx, admin, name, groups, applied); err != nil {
		return nil, err
	}
	user, err := te.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding modelgate's user: %w", err)
	}
	return user, nil
}
