package env

import (
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/modelgate/modelgate/webhook"
)

// TestLeastPrivilege holds the installs to the permissions
// docs/operations.md lists: the cert-manager install can neither read a
// Secret but the record key's (which it may create) nor change a webhook
// configuration or CRD; the self-managed one
// adds only create on Secrets in modelgate's namespace and get/update on
// the objects it names.
func TestLeastPrivilege(t *testing.T) {
	rules := func(dir string) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, cr := range ofType[*rbacv1.ClusterRole](decoded(t, dir)) {
			out = append(out, cr.Rules...)
		}
		for _, r := range ofType[*rbacv1.Role](decoded(t, dir)) {
			if r.Namespace != Namespace {
				t.Errorf("%s: Role %s/%s outside modelgate's namespace", dir, r.Namespace, r.Name)
			}
			out = append(out, r.Rules...)
		}
		return out
	}
	for _, r := range rules(defaultInstall) {
		for _, res := range r.Resources {
			if res == "secrets" && !recordKeyRule(r) {
				t.Errorf("%s grants %v on secrets %v: only create, and get on %s", defaultInstall, r.Verbs, r.ResourceNames, webhook.RecordKeySecret)
			}
			if (res == "mutatingwebhookconfigurations" || res == "validatingwebhookconfigurations" ||
				res == "customresourcedefinitions") && slices.ContainsFunc(r.Verbs, isWrite) {
				t.Errorf("%s grants %v on %s", defaultInstall, r.Verbs, res)
			}
			if slices.Contains(r.Verbs, "*") || res == "*" {
				t.Errorf("%s grants a wildcard: %+v", defaultInstall, r)
			}
		}
	}
	extra := 0
	for _, r := range rules(filepath.Join(selfManagedInstall, "rbac")) {
		extra++
		named := len(r.ResourceNames) > 0
		createSecret := slices.Equal(r.Resources, []string{"secrets"}) && slices.Equal(r.Verbs, []string{"create"})
		if !named && !createSecret {
			t.Errorf("%s/rbac: a rule not narrowed to named objects: %+v", selfManagedInstall, r)
		}
		if slices.Contains(r.Verbs, "delete") || slices.Contains(r.Verbs, "list") || slices.Contains(r.Verbs, "watch") {
			t.Errorf("%s/rbac: more than get, create and update: %+v", selfManagedInstall, r)
		}
	}
	if extra == 0 {
		t.Errorf("%s/rbac grants nothing: self mode could not keep its Secret", selfManagedInstall)
	}
}

// recordKeyRule reports whether r is one of the two rules the record key
// needs: create on Secrets, or get on the record key Secret alone.
func recordKeyRule(r rbacv1.PolicyRule) bool {
	secrets := slices.Equal(r.Resources, []string{"secrets"})
	create := slices.Equal(r.Verbs, []string{"create"}) && len(r.ResourceNames) == 0
	get := slices.Equal(r.Verbs, []string{"get"}) && slices.Equal(r.ResourceNames, []string{webhook.RecordKeySecret})
	return secrets && (create || get)
}

func isWrite(verb string) bool {
	return verb != "get" && verb != "list" && verb != "watch"
}
