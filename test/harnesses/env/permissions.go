package env

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountGroups are the groups a service account's token
// authenticates in.
func ServiceAccountGroups(namespace string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// WaitForPermissions waits until the API server's authorizer grants the
// user, in the groups, every rule of the roles that objs (rendered RBAC,
// as Apply applies it) bind to it: each verb on each resource, name and
// non-resource URL, asked with a SubjectAccessReview. The authorizer reads
// roles and bindings from informers, so a binding just created is not in
// force at once, and a client acting as the user a moment later may be
// refused (a controller's first list, backing off for seconds). A role a
// binding names that objs do not hold is read from the API server.
func WaitForPermissions(ctx context.Context, c client.Client, user string, groups []string, objs []*unstructured.Unstructured) error {
	reviews, err := grantedReviews(ctx, c, user, groups, objs)
	if err != nil {
		return err
	}
	if len(reviews) == 0 {
		return fmt.Errorf("waiting for %s's permissions: the objects bind it no role", user)
	}
	var pending string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for len(reviews) > 0 {
			sar := reviews[0].DeepCopy()
			if err := c.Create(ctx, sar); err != nil {
				pending = err.Error()
				return false, nil //nolint:nilerr // polled again; the pending review is reported on timeout
			}
			if !sar.Status.Allowed {
				pending = describe(&sar.Spec)
				return false, nil
			}
			reviews = reviews[1:]
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s's permissions: not in force yet: %s: %w", user, pending, err)
	}
	return nil
}

// grantedReviews are the SubjectAccessReviews, one per permission, of
// every rule objs bind to the user or one of the groups.
func grantedReviews(ctx context.Context, c client.Client, user string, groups []string, objs []*unstructured.Unstructured) ([]*authorizationv1.SubjectAccessReview, error) {
	roles := map[string]*rbacv1.Role{}               // namespace/name
	clusterRoles := map[string]*rbacv1.ClusterRole{} // name
	var bindings []*rbacv1.RoleBinding               // a ClusterRoleBinding as a RoleBinding in ""
	for _, u := range objs {
		switch u.GetKind() {
		case "Role":
			r := &rbacv1.Role{}
			if err := fromUnstructured(u, r); err != nil {
				return nil, err
			}
			roles[r.Namespace+"/"+r.Name] = r
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if err := fromUnstructured(u, r); err != nil {
				return nil, err
			}
			clusterRoles[r.Name] = r
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			if err := fromUnstructured(u, b); err != nil {
				return nil, err
			}
			bindings = append(bindings, b)
		case "ClusterRoleBinding":
			cb := &rbacv1.ClusterRoleBinding{}
			if err := fromUnstructured(u, cb); err != nil {
				return nil, err
			}
			bindings = append(bindings, &rbacv1.RoleBinding{ObjectMeta: cb.ObjectMeta, Subjects: cb.Subjects, RoleRef: cb.RoleRef})
		}
	}
	var out []*authorizationv1.SubjectAccessReview
	for _, b := range bindings {
		if !binds(b.Subjects, user, groups) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "Role":
			r, ok := roles[b.Namespace+"/"+b.RoleRef.Name]
			if !ok {
				r = &rbacv1.Role{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.RoleRef.Name}, r); err != nil {
					return nil, fmt.Errorf("reading Role %s/%s that %s binds: %w", b.Namespace, b.RoleRef.Name, b.Name, err)
				}
			}
			rules = r.Rules
		case "ClusterRole":
			r, ok := clusterRoles[b.RoleRef.Name]
			if !ok {
				r = &rbacv1.ClusterRole{}
				if err := c.Get(ctx, client.ObjectKey{Name: b.RoleRef.Name}, r); err != nil {
					return nil, fmt.Errorf("reading ClusterRole %s that %s binds: %w", b.RoleRef.Name, b.Name, err)
				}
			}
			rules = r.Rules
		}
		for _, rule := range rules {
			out = append(out, reviewsOf(rule, b.Namespace, user, groups)...)
		}
	}
	return out, nil
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// binds reports whether a subject is the user or one of the groups (a
// service account subject is its user name).
func binds(subjects []rbacv1.Subject, user string, groups []string) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == user {
				return true
			}
		case rbacv1.GroupKind:
			for _, g := range groups {
				if s.Name == g {
					return true
				}
			}
		case rbacv1.ServiceAccountKind:
			if "system:serviceaccount:"+s.Namespace+":"+s.Name == user {
				return true
			}
		}
	}
	return false
}

// reviewsOf is one SubjectAccessReview per permission the rule grants, in
// the namespace ("" for a ClusterRoleBinding's).
func reviewsOf(rule rbacv1.PolicyRule, namespace, user string, groups []string) []*authorizationv1.SubjectAccessReview {
	review := func() *authorizationv1.SubjectAccessReview {
		return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups}}
	}
	var out []*authorizationv1.SubjectAccessReview
	for _, verb := range rule.Verbs {
		for _, url := range rule.NonResourceURLs {
			r := review()
			r.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: url, Verb: verb}
			out = append(out, r)
		}
		names := rule.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, group := range rule.APIGroups {
			for _, res := range rule.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, name := range names {
					r := review()
					r.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
						Namespace: namespace, Verb: verb, Group: group, Resource: resource, Subresource: sub, Name: name,
					}
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// describe names what a review asks, for an error.
func describe(s *authorizationv1.SubjectAccessReviewSpec) string {
	if a := s.NonResourceAttributes; a != nil {
		return fmt.Sprintf("%s %s", a.Verb, a.Path)
	}
	if a := s.ResourceAttributes; a != nil {
		return fmt.Sprintf("%s %s.%s/%s %q in namespace %q", a.Verb, a.Resource, a.Group, a.Subresource, a.Name, a.Namespace)
	}
	return "nothing"
}
