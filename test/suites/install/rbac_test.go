package install

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelgate/modelgate/test/harnesses/env"
	"github.com/modelgate/modelgate/webhook"
)

// TestLeastPrivilege holds the installs to the permissions
// docs/operations.md and docs/api/aiinference.md list: the cert-manager install can neither read a
// Secret but the record key's (which it may create) nor change a webhook
// configuration or CRD; the self-managed one
// adds only create on Secrets in modelgate's namespace and get/update on
// the objects it names. The secure metrics endpoint adds create on
// TokenReviews and SubjectAccessReviews to modelgate's ClusterRole, and
// the installs ship modelgate-metrics-reader (get on /metrics alone) for
// the operator to bind to their scraper, bound to nobody.
func TestLeastPrivilege(t *testing.T) {
	rules := func(dir string) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, cr := range ofType[*rbacv1.ClusterRole](decoded(t, dir)) {
			if !peopleRoles[cr.Name] {
				out = append(out, cr.Rules...)
			}
		}
		for _, r := range ofType[*rbacv1.Role](decoded(t, dir)) {
			if r.Namespace != env.Namespace {
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
	checkMetricsRBAC(t, decoded(t, defaultInstall))
	checkControllerRBAC(t, decoded(t, defaultInstall))
	checkExceptionRoles(t, decoded(t, defaultInstall))
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

// peopleRoles are the ClusterRoles the installs ship for people to be
// bound to, not modelgate's own.
var peopleRoles = map[string]bool{"modelgate-exception-author": true, "modelgate-exception-viewer": true}

// checkExceptionRoles checks the roles of WorkloadPolicyExceptions
// (docs/policies.md, "Exceptions"): writing one is a permission of its own,
// never aggregated into edit or admin and bound to nobody by the install;
// reading them is part of view.
func checkExceptionRoles(t *testing.T, objs []client.Object) {
	t.Helper()
	found := 0
	for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
		if !peopleRoles[cr.Name] {
			continue
		}
		found++
		for k, v := range cr.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") && v == "true" &&
				(cr.Name == "modelgate-exception-author" || k != "rbac.authorization.k8s.io/aggregate-to-view") {
				t.Errorf("ClusterRole %s is aggregated by %s: exceptions would come with a built-in role", cr.Name, k)
			}
		}
		for _, r := range cr.Rules {
			writes := slices.ContainsFunc(r.Verbs, isWrite)
			switch {
			case slices.Contains(r.Resources, "workloadpolicies") && writes:
				t.Errorf("ClusterRole %s grants %v on workloadpolicies: an exception author must not change the policies", cr.Name, r.Verbs)
			case cr.Name == "modelgate-exception-viewer" && writes:
				t.Errorf("ClusterRole %s grants %v: read alone", cr.Name, r.Verbs)
			case slices.ContainsFunc(r.Resources, func(res string) bool { return res != "workloadpolicies" && res != "workloadpolicyexceptions" }):
				t.Errorf("ClusterRole %s grants %v on %v: exceptions and policies alone", cr.Name, r.Verbs, r.Resources)
			}
		}
	}
	if found != len(peopleRoles) {
		t.Errorf("the install ships %d of the exception roles %v", found, peopleRoles)
	}
	for _, b := range ofType[*rbacv1.ClusterRoleBinding](objs) {
		if peopleRoles[b.RoleRef.Name] {
			t.Errorf("ClusterRoleBinding %s binds %s: the operator binds it, per namespace", b.Name, b.RoleRef.Name)
		}
	}
}

// metricsReader is the ClusterRole a Prometheus is bound to
// (config/rbac/metrics_reader_role.yaml, docs/operations.md "Metrics and
// alerts").
const metricsReader = "modelgate-metrics-reader"

// checkMetricsRBAC checks the permissions behind the secure metrics
// endpoint: modelgate may create TokenReviews and SubjectAccessReviews
// (and nothing else on them), only modelgate-metrics-reader grants a
// non-resource URL, get on /metrics alone, and the install binds it to
// nobody: who scrapes is the operator's choice.
func checkMetricsRBAC(t *testing.T, objs []client.Object) {
	t.Helper()
	reviews := map[string]string{"tokenreviews": "authentication.k8s.io", "subjectaccessreviews": "authorization.k8s.io"}
	granted := map[string]bool{}
	reader := false
	for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
		if cr.Name == metricsReader {
			reader = true
			want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
			if !slices.EqualFunc(cr.Rules, want, func(a, b rbacv1.PolicyRule) bool {
				return slices.Equal(a.NonResourceURLs, b.NonResourceURLs) && slices.Equal(a.Verbs, b.Verbs) &&
					len(a.APIGroups)+len(a.Resources)+len(a.ResourceNames) == 0
			}) {
				t.Errorf("ClusterRole %s rules %+v, want get on /metrics alone", metricsReader, cr.Rules)
			}
			// Aggregated into view, edit or admin, every namespace viewer
			// could read the metrics.
			for l := range cr.Labels {
				if strings.HasPrefix(l, "rbac.authorization.k8s.io/aggregate-to-") {
					t.Errorf("ClusterRole %s is aggregated (label %s): only those bound to it may scrape", metricsReader, l)
				}
			}
			continue
		}
		for _, r := range cr.Rules {
			if len(r.NonResourceURLs) > 0 {
				t.Errorf("ClusterRole %s grants non-resource URLs %v: only %s may", cr.Name, r.NonResourceURLs, metricsReader)
			}
			for _, res := range r.Resources {
				group, ok := reviews[res]
				if !ok {
					continue
				}
				if !slices.Equal(r.APIGroups, []string{group}) || !slices.Equal(r.Verbs, []string{"create"}) || len(r.ResourceNames) > 0 {
					t.Errorf("ClusterRole %s grants %v on %v %s: want create alone", cr.Name, r.Verbs, r.APIGroups, res)
				}
				granted[res] = true
			}
		}
	}
	if !reader {
		t.Errorf("no ClusterRole %s: a scraper has nothing to be bound to", metricsReader)
	}
	for res := range reviews {
		if !granted[res] {
			t.Errorf("modelgate may not create %s: the metrics endpoint cannot authenticate or authorize a scraper", res)
		}
	}
	for _, b := range ofType[*rbacv1.ClusterRoleBinding](objs) {
		if b.RoleRef.Name == metricsReader {
			t.Errorf("ClusterRoleBinding %s binds %s to %+v: the operator binds it to their scraper", b.Name, metricsReader, b.Subjects)
		}
	}
	for _, b := range ofType[*rbacv1.RoleBinding](objs) {
		if b.RoleRef.Name == metricsReader {
			t.Errorf("RoleBinding %s/%s binds %s: the operator binds it to their scraper", b.Namespace, b.Name, metricsReader)
		}
	}
}

// controllerReads are the resources the AIInference controller only reads
// (verbs at most get, list, watch), and controllerWrites those it writes:
// created, updated, patched, never deleted (garbage collection does that).
var (
	controllerReads = map[string]bool{"pods": true, "replicasets": true, "aiinferences": true, "namespaces": true,
		// The audit lists the workloads it judges.
		"statefulsets": true, "jobs": true, "cronjobs": true}
	controllerWrites = map[string]bool{"deployments": true, "services": true, "aiinferences/status": true}
)

// checkControllerRBAC checks the permissions the AIInference controller
// adds (docs/api/aiinference.md, "Permissions"): no delete on anything
// but the GPU claim templates modelgate makes (docs/injection.md, "GPUs
// through DRA"), whose claims it only reads, and the
// ValidatingAdmissionPolicies and bindings made of CEL forms;
// Pods, ReplicaSets and AIInferences read, never written; Deployments and
// Services created and updated; aiinferences/finalizers update alone (an
// owner reference that blocks deletion needs it); events create and patch;
// and the leader-election Lease in modelgate's namespace alone, through a
// Role.
func checkControllerRBAC(t *testing.T, objs []client.Object) {
	t.Helper()
	seen := map[string]bool{}
	for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
		if peopleRoles[cr.Name] {
			continue
		}
		for _, r := range cr.Rules {
			for _, res := range r.Resources {
				seen[res] = true
				switch {
				case res == "resourceclaimtemplates":
					// The GPU claim templates modelgate makes: created for
					// the Pods that name them, deleted once unused.
					if !subset(r.Verbs, "get", "list", "watch", "create", "delete") {
						t.Errorf("ClusterRole %s grants %v on resourceclaimtemplates: more than get, list, watch, create and delete", cr.Name, r.Verbs)
					}
				case res == "validatingadmissionpolicies" || res == "validatingadmissionpolicybindings":
					// The policies made of the WorkloadPolicies' CEL forms
					// (controller/celpolicy): applied, and deleted when a
					// form goes.
					if !subset(r.Verbs, "get", "list", "watch", "create", "patch", "delete") {
						t.Errorf("ClusterRole %s grants %v on %s: more than get, list, watch, create, patch and delete", cr.Name, r.Verbs, res)
					}
				case res == "resourceclaims" && slices.ContainsFunc(r.Verbs, isWrite):
					t.Errorf("ClusterRole %s grants %v on resourceclaims: read alone", cr.Name, r.Verbs)
				case slices.Contains(r.Verbs, "delete") || slices.Contains(r.Verbs, "deletecollection"):
					t.Errorf("ClusterRole %s may delete %s: the controller never deletes", cr.Name, res)
				case controllerReads[res] && slices.ContainsFunc(r.Verbs, isWrite):
					t.Errorf("ClusterRole %s grants %v on %s: read alone", cr.Name, r.Verbs, res)
				case controllerWrites[res] && !subset(r.Verbs, "get", "list", "watch", "create", "update", "patch"):
					t.Errorf("ClusterRole %s grants %v on %s: more than create, update and patch", cr.Name, r.Verbs, res)
				case res == "aiinferences/finalizers" && !slices.Equal(r.Verbs, []string{"update"}):
					t.Errorf("ClusterRole %s grants %v on aiinferences/finalizers: update alone", cr.Name, r.Verbs)
				case res == "events" && !subset(r.Verbs, "create", "patch"):
					t.Errorf("ClusterRole %s grants %v on events: create and patch alone", cr.Name, r.Verbs)
				case (res == "policyreports" || res == "reports") && !subset(r.Verbs, "list", "create", "patch"):
					t.Errorf("ClusterRole %s grants %v on policyreports: the audit lists, creates and applies its own alone", cr.Name, r.Verbs)
				case res == "leases":
					t.Errorf("ClusterRole %s grants %v on leases in every namespace: only modelgate's Lease, through a Role", cr.Name, r.Verbs)
				}
			}
		}
	}
	for _, res := range []string{"deployments", "services", "pods", "replicasets", "aiinferences", "aiinferences/status", "events",
		"statefulsets", "jobs", "cronjobs", "policyreports"} {
		if !seen[res] {
			t.Errorf("modelgate's ClusterRole grants nothing on %s: the AIInference controller cannot work", res)
		}
	}
	leases := false
	for _, r := range ofType[*rbacv1.Role](objs) {
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "leases") {
				leases = true
				if !subset(rule.Verbs, "get", "create", "update") {
					t.Errorf("Role %s/%s grants %v on leases: get, create and update alone", r.Namespace, r.Name, rule.Verbs)
				}
			}
		}
	}
	if !leases {
		t.Errorf("no Role grants leases in %s: leader election cannot hold its Lease", env.Namespace)
	}
}

// subset reports whether every verb is one of allowed.
func subset(verbs []string, allowed ...string) bool {
	for _, v := range verbs {
		if !slices.Contains(allowed, v) {
			return false
		}
	}
	return true
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
