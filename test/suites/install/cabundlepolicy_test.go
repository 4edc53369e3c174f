package install

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/modelgate/modelgate/hack/render"
	"github.com/modelgate/modelgate/test/harnesses/env"
)

// caBundlePolicy names the ValidatingAdmissionPolicy of config/self-managed
// and its binding; aiInferenceCRD is the CRD whose conversion webhook
// modelgate injects its CA into.
const (
	caBundlePolicy = "modelgate-cabundle-only"
	aiInferenceCRD = "aiinferences.serving.modelgate.io"
)

// caBundlePolicyOf returns the install's CA bundle policy and its binding.
func caBundlePolicyOf(t *testing.T, objs []client.Object) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	return only[*admissionregistrationv1.ValidatingAdmissionPolicy](t, objs), only[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, objs)
}

// TestCABundlePolicy checks config/self-managed's CA bundle policy against
// the rest of the install: it denies, it fails closed, and it guards
// exactly the objects modelgate injects its CA into (the Configuration's
// targets), which are all the webhook configurations and CRDs its service
// account may write.
func TestCABundlePolicy(t *testing.T) {
	objs := decoded(t, selfManagedInstall)
	vap, binding := caBundlePolicyOf(t, objs)
	if vap.Name != caBundlePolicy {
		t.Errorf("policy %s, want %s", vap.Name, caBundlePolicy)
	}
	if binding.Spec.PolicyName != vap.Name {
		t.Errorf("binding %s binds policy %q, want %q", binding.Name, binding.Spec.PolicyName, vap.Name)
	}
	if got := binding.Spec.ValidationActions; !slices.Equal(got, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("validationActions %q, want [Deny]", got)
	}
	if binding.Spec.ParamRef != nil || binding.Spec.MatchResources != nil || vap.Spec.ParamKind != nil {
		t.Errorf("binding paramRef %+v, matchResources %+v, policy paramKind %+v: want none, the policy matches by itself",
			binding.Spec.ParamRef, binding.Spec.MatchResources, vap.Spec.ParamKind)
	}
	if p := vap.Spec.FailurePolicy; p == nil || *p != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail: a request the policy cannot evaluate must be refused", p)
	}
	for i, v := range vap.Spec.Validations {
		if v.Reason == nil || *v.Reason != "Forbidden" {
			t.Errorf("validation %d: reason %v, want Forbidden", i, v.Reason)
		}
		if !strings.Contains(v.Message, "may only change") {
			t.Errorf("validation %d: message %q does not say what is allowed (\"may only change ...\")", i, v.Message)
		}
	}

	mc := vap.Spec.MatchConstraints
	if mc == nil {
		t.Fatal("no matchConstraints")
	}
	if mc.MatchPolicy == nil || *mc.MatchPolicy != admissionregistrationv1.Equivalent {
		t.Errorf("matchPolicy %v, want Equivalent: a request through another version must be checked too", mc.MatchPolicy)
	}
	if !emptySelector(mc.NamespaceSelector) || !emptySelector(mc.ObjectSelector) || len(mc.ExcludeResourceRules) > 0 {
		t.Errorf("matchConstraints select or exclude objects (%+v, %+v, %+v): nothing may escape by its labels",
			mc.NamespaceSelector, mc.ObjectSelector, mc.ExcludeResourceRules)
	}
	// What the policy guards on UPDATE and on DELETE, as resource/name.
	guarded := map[admissionregistrationv1.OperationType]sets.Set[string]{
		admissionregistrationv1.Update: {}, admissionregistrationv1.Delete: {},
	}
	for _, r := range mc.ResourceRules {
		for _, op := range r.Operations {
			for _, res := range r.Resources {
				for _, name := range r.ResourceNames {
					if guarded[op] != nil {
						guarded[op].Insert(res + "/" + name)
					}
				}
			}
		}
	}
	self := installConfiguration(t, objs).Certificates.Self
	targets := sets.New[string]()
	for _, n := range self.MutatingWebhookConfigurations {
		targets.Insert("mutatingwebhookconfigurations/" + n)
	}
	for _, n := range self.ValidatingWebhookConfigurations {
		targets.Insert("validatingwebhookconfigurations/" + n)
	}
	for _, n := range self.CustomResourceDefinitions {
		targets.Insert("customresourcedefinitions/" + n)
	}
	for op, got := range guarded {
		if !got.Equal(targets) {
			t.Errorf("%s: the policy guards %v, the rotator injects into %v (certificates.self)", op, sets.List(got), sets.List(targets))
		}
	}
	sa := only[*corev1.ServiceAccount](t, objs)
	for _, w := range writableBy(t, objs, sa) {
		if !targets.Has(w) {
			t.Errorf("modelgate's service account may write %s, which the policy does not guard", w)
		}
	}
}

// emptySelector reports whether a selector selects everything.
func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// writableBy returns what the ClusterRoles bound to the service account
// let it write among webhook configurations and CRDs, as resource/name
// ("resource/*" for every object).
func writableBy(t *testing.T, objs []client.Object, sa *corev1.ServiceAccount) []string {
	t.Helper()
	bound := sets.New[string]()
	for _, b := range ofType[*rbacv1.ClusterRoleBinding](objs) {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == sa.Namespace && s.Name == sa.Name && b.RoleRef.Kind == "ClusterRole" {
				bound.Insert(b.RoleRef.Name)
			}
		}
	}
	var out []string
	for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
		if !bound.Has(cr.Name) {
			continue
		}
		for _, r := range cr.Rules {
			if !slices.ContainsFunc(r.Verbs, isWrite) {
				continue
			}
			for _, res := range r.Resources {
				if res != "mutatingwebhookconfigurations" && res != "validatingwebhookconfigurations" && res != "customresourcedefinitions" && res != "*" {
					continue
				}
				if len(r.ResourceNames) == 0 {
					out = append(out, res+"/*")
				}
				for _, n := range r.ResourceNames {
					out = append(out, res+"/"+n)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("modelgate's service account may write no webhook configuration or CRD: is config/self-managed/rbac bound?")
	}
	return out
}

// matchesUser evaluates the policy's match conditions (all must hold) for
// a request by the user, with cel-go as the API server would.
func matchesUser(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy, user string) bool {
	t.Helper()
	celEnv, err := cel.NewEnv(cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	request := map[string]any{"userInfo": map[string]any{"username": user}}
	for _, mc := range vap.Spec.MatchConditions {
		if evalCEL(t, celEnv, mc.Expression, map[string]any{"request": request}) != types.True {
			return false
		}
	}
	return len(vap.Spec.MatchConditions) > 0
}

// evalCEL compiles and evaluates an expression, failing the test on an
// error.
func evalCEL(t *testing.T, celEnv *cel.Env, expr string, vars map[string]any) ref.Val {
	t.Helper()
	ast, iss := celEnv.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compiling %q: %v", expr, iss.Err())
	}
	prg, err := celEnv.Program(ast)
	if err != nil {
		t.Fatalf("compiling %q: %v", expr, err)
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		t.Fatalf("evaluating %q: %v", expr, err)
	}
	return out
}

// TestCABundlePolicyUser checks whom the policy restricts: modelgate's
// service account, as the install names it, and no one else; and that the
// username follows the kustomization's namespace (a copy of config/ with
// another namespace in config/self-managed, rendered in memory).
func TestCABundlePolicyUser(t *testing.T) {
	root, err := env.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const otherNS = "ml-admission"
	mem := filesys.MakeFsInMemory()
	err = filepath.WalkDir(filepath.Join(root, "config"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if rel == filepath.Join(selfManagedInstall, "kustomization.yaml") {
			b = []byte(strings.Replace(string(b), "\nnamespace: modelgate-system\n", "\nnamespace: "+otherNS+"\n", 1))
		}
		return mem.WriteFile(filepath.Join("/repo", rel), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := render.RenderFS(mem, filepath.Join("/repo", selfManagedInstall))
	if err != nil {
		t.Fatal(err)
	}
	movedObjs, err := env.DecodeStrict(moved)
	if err != nil {
		t.Fatal(err)
	}

	for dir, objs := range map[string][]client.Object{
		selfManagedInstall:                    decoded(t, selfManagedInstall),
		selfManagedInstall + " in " + otherNS: movedObjs,
	} {
		t.Run(dir, func(t *testing.T) {
			sa := only[*corev1.ServiceAccount](t, objs)
			if dir != selfManagedInstall && sa.Namespace != otherNS {
				t.Fatalf("the ServiceAccount is in %s: the edited kustomization did not move the install", sa.Namespace)
			}
			vap, _ := caBundlePolicyOf(t, objs)
			for user, want := range map[string]bool{
				serviceAccountUser(sa.Namespace, sa.Name):          true,
				serviceAccountUser("elsewhere", sa.Name):           false,
				serviceAccountUser(sa.Namespace, "default"):        false,
				serviceAccountUser(sa.Namespace, sa.Name+"-extra"): false,
				serviceAccountUser(sa.Namespace+"x", sa.Name):      false,
				"system:admin": false,
				"system:serviceaccount:" + sa.Namespace + ":" + sa.Name + ":x": false,
			} {
				if got := matchesUser(t, vap, user); got != want {
					t.Errorf("the policy restricts %s: %t, want %t", user, got, want)
				}
			}
		})
	}
}

// TestCABundlePolicyFieldsAddedLater evaluates the policy's variables and
// validations with cel-go on the install's own objects, the way the API
// server gets them (converted to unstructured maps), with fields no API
// version has yet: the key-by-key comparisons refuse them at every level,
// which a policy listing today's fields would not; the real API server
// cannot be sent such a field, so this is the one place to prove it.
func TestCABundlePolicyFieldsAddedLater(t *testing.T) {
	objs := decoded(t, selfManagedInstall)
	vap, _ := caBundlePolicyOf(t, objs)
	sa := only[*corev1.ServiceAccount](t, objs)
	asMap := func(o client.Object) map[string]any {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	bases := map[string]map[string]any{}
	for _, o := range objs {
		switch o.GetName() {
		case "modelgate-mutating", "modelgate-validating", aiInferenceCRD:
			bases[o.GetName()] = asMap(o)
		}
	}
	if got := slices.Sorted(maps.Keys(bases)); !slices.Equal(got, []string{aiInferenceCRD, "modelgate-mutating", "modelgate-validating"}) {
		t.Fatalf("the install renders the CA bundle targets %v", got)
	}
	group := map[string]string{"modelgate-mutating": "admissionregistration.k8s.io", "modelgate-validating": "admissionregistration.k8s.io", aiInferenceCRD: "apiextensions.k8s.io"}
	celEnv, err := cel.NewEnv(cel.OptionalTypes(), ext.Strings(),
		cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)))
	if err != nil {
		t.Fatal(err)
	}
	// denials evaluates the policy on an update of the named object and
	// returns its messages.
	denials := func(name string, edit func(after, before map[string]any)) []string {
		after, before := runtime.DeepCopyJSON(bases[name]), runtime.DeepCopyJSON(bases[name])
		edit(after, before)
		vars := map[string]any{
			"request": map[string]any{
				"operation": "UPDATE", "name": name,
				"resource": map[string]any{"group": group[name]},
				"userInfo": map[string]any{"username": serviceAccountUser(sa.Namespace, sa.Name)},
			},
			"object": after, "oldObject": before,
		}
		// The API server evaluates variables lazily; here each is
		// evaluated in order, an error kept as an error value for the
		// expressions that select it.
		values := map[string]ref.Val{}
		vars["variables"] = values
		for _, v := range vap.Spec.Variables {
			ast, iss := celEnv.Compile(v.Expression)
			if iss.Err() != nil {
				t.Fatalf("variable %s: %v", v.Name, iss.Err())
			}
			prg, err := celEnv.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := prg.Eval(vars)
			if err != nil {
				out = types.NewErr("%v", err)
			}
			values[v.Name] = out
		}
		var msgs []string
		for _, v := range vap.Spec.Validations {
			if out := evalCEL(t, celEnv, v.Expression, vars); out != types.True {
				msgs = append(msgs, evalCEL(t, celEnv, v.MessageExpression, vars).Value().(string))
			}
		}
		return msgs
	}
	webhook := func(o map[string]any, i int) map[string]any { return o["webhooks"].([]any)[i].(map[string]any) }
	conversion := func(o map[string]any) map[string]any {
		return o["spec"].(map[string]any)["conversion"].(map[string]any)
	}
	crdClient := func(o map[string]any) map[string]any {
		return conversion(o)["webhook"].(map[string]any)["clientConfig"].(map[string]any)
	}
	for name, tc := range map[string]struct {
		object string
		edit   func(after, before map[string]any)
		want   string // a phrase of the one message, or "" for allowed
	}{
		"mutating: every caBundle": {object: "modelgate-mutating", edit: func(after, _ map[string]any) {
			for i := range after["webhooks"].([]any) {
				webhook(after, i)["clientConfig"].(map[string]any)["caBundle"] = "Y2E="
			}
		}},
		"mutating: a webhook field added later": {object: "modelgate-mutating", want: "not its rules", edit: func(after, _ map[string]any) {
			webhook(after, 1)["trafficPolicy"] = "mirror"
		}},
		"mutating: a webhook field added later, removed": {object: "modelgate-mutating", want: "not its rules", edit: func(_, before map[string]any) {
			webhook(before, 1)["trafficPolicy"] = "mirror"
		}},
		"validating: a clientConfig field added later": {object: "modelgate-validating", want: "not its rules", edit: func(after, _ map[string]any) {
			webhook(after, 0)["clientConfig"].(map[string]any)["proxy"] = "https://attacker.example.com"
		}},
		"validating: a top-level field added later": {object: "modelgate-validating", want: "may only change the caBundle fields of modelgate-validating", edit: func(after, _ map[string]any) {
			after["defaults"] = map[string]any{"failurePolicy": "Ignore"}
		}},
		"validating: a metadata field added later": {object: "modelgate-validating", want: "other metadata", edit: func(after, _ map[string]any) {
			after["metadata"].(map[string]any)["disabled"] = true
		}},
		"validating: managedFields, resourceVersion and generation": {object: "modelgate-validating", edit: func(after, _ map[string]any) {
			m := after["metadata"].(map[string]any)
			m["managedFields"], m["resourceVersion"], m["generation"] = []any{}, "42", int64(2)
		}},
		"crd: the caBundle": {object: aiInferenceCRD, edit: func(after, _ map[string]any) {
			crdClient(after)["caBundle"] = "Y2E="
		}},
		"crd: a spec field added later": {object: aiInferenceCRD, want: "not its versions", edit: func(after, _ map[string]any) {
			after["spec"].(map[string]any)["validation"] = "off"
		}},
		"crd: a conversion field added later": {object: aiInferenceCRD, want: "not its versions", edit: func(after, _ map[string]any) {
			conversion(after)["fallback"] = "None"
		}},
		"crd: a conversion webhook field added later": {object: aiInferenceCRD, want: "not its versions", edit: func(after, _ map[string]any) {
			conversion(after)["webhook"].(map[string]any)["timeoutSeconds"] = int64(30)
		}},
		"crd: a clientConfig field added later": {object: aiInferenceCRD, want: "not its versions", edit: func(after, _ map[string]any) {
			crdClient(after)["proxy"] = "https://attacker.example.com"
		}},
	} {
		t.Run(name, func(t *testing.T) {
			got := denials(tc.object, tc.edit)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("denied, want allowed: %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("messages %q, want one with %q", got, tc.want)
			}
		})
	}
}
