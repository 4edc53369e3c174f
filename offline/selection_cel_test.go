package offline

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
)

// celWebhook is one validating webhook of validating-selectors.yaml: its
// namespace selector and its match conditions, compiled with cel-go.
type celWebhook struct {
	name       string
	selector   labels.Selector
	conditions []cel.Program
}

// loadSelectors reads the validating webhooks' selectors and CEL match
// conditions as the API server gets them.
func loadSelectors(t *testing.T) []celWebhook {
	t.Helper()
	data, err := os.ReadFile("../config/webhook/validating-selectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatal(err)
	}
	env, err := cel.NewEnv(cel.OptionalTypes(), cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	var out []celWebhook
	for _, w := range cfg.Webhooks {
		sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		hook := celWebhook{name: w.Name, selector: sel}
		for _, mc := range w.MatchConditions {
			ast, iss := env.Compile(mc.Expression)
			if iss.Err() != nil {
				t.Fatalf("%s/%s: %v", w.Name, mc.Name, iss.Err())
			}
			prg, err := env.Program(ast)
			if err != nil {
				t.Fatalf("%s/%s: %v", w.Name, mc.Name, err)
			}
			hook.conditions = append(hook.conditions, prg)
		}
		out = append(out, hook)
	}
	if len(out) != 3 {
		t.Fatalf("%d validating webhooks in the selectors, want 3", len(out))
	}
	return out
}

// sentByCEL is what the API server decides: some webhook whose namespace
// selector matches and whose every match condition holds.
func sentByCEL(t *testing.T, hooks []celWebhook, obj string, nsLabels map[string]string) (bool, []string) {
	t.Helper()
	var o map[string]any
	if err := json.Unmarshal([]byte(obj), &o); err != nil {
		t.Fatal(err)
	}
	ls := labels.Set{"kubernetes.io/metadata.name": "team-a"}
	for k, v := range nsLabels {
		ls[k] = v
	}
	var by []string
	for _, h := range hooks {
		if !h.selector.Matches(ls) {
			continue
		}
		all := true
		for _, prg := range h.conditions {
			request := map[string]any{"kind": map[string]any{"kind": o["kind"]}, "operation": "CREATE"}
			v, _, err := prg.Eval(map[string]any{"object": o, "oldObject": nil, "request": request})
			if err != nil {
				t.Fatalf("%s: %v", h.name, err)
			}
			all = all && v.Value() == true
		}
		if all {
			by = append(by, h.name)
		}
	}
	return len(by) > 0, by
}

// SentToPolicies mirrors the webhook configuration the API server applies:
// for every object and namespace here, it agrees with the real selectors
// and CEL match conditions, and at most one webhook sends an object.
func TestSentToPoliciesMatchesTheWebhookConfiguration(t *testing.T) {
	hooks := loadSelectors(t)
	deployment := func(templateAnnotations, limits string) string {
		return `{"kind":"Deployment","metadata":{},"spec":{"template":{"metadata":{"annotations":` + templateAnnotations +
			`},"spec":{"containers":[{"name":"c","resources":{"limits":` + limits + `}}]}}}}`
	}
	objects := map[string]string{
		"opted in":                    deployment(`{"modelgate.io/inject":"true"}`, `{}`),
		"malformed opt-in":            deployment(`{"modelgate.io/inject":"yes"}`, `{}`),
		"plain":                       deployment(`{}`, `{}`),
		"opted out":                   deployment(`{"modelgate.io/inject":"false"}`, `{}`),
		"GPUs":                        deployment(`{}`, `{"nvidia.com/gpu":"1"}`),
		"opted out with GPUs":         deployment(`{"modelgate.io/inject":"false"}`, `{"nvidia.com/gpu":"1"}`),
		"another vendor's GPUs":       deployment(`{}`, `{"amd.com/gpu":"1"}`),
		"MIG instances":               deployment(`{}`, `{"nvidia.com/mig-1g.10gb":"2"}`),
		"a CPU-only resource":         deployment(`{}`, `{"example.com/fpga":"1"}`),
		"Pod resource claim":          `{"kind":"Pod","metadata":{},"spec":{"resourceClaims":[{"name":"gpu"}],"containers":[{"name":"c","resources":{"claims":[{"name":"gpu"}]}}]}}`,
		"opt-in on the object itself": `{"kind":"Deployment","metadata":{"annotations":{"modelgate.io/inject":"true"}},"spec":{"template":{"spec":{"containers":[{"name":"c"}]}}}}`,
		"CronJob pod template opt-in": `{"kind":"CronJob","metadata":{},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"modelgate.io/inject":"true"}}}}}}}`,
		"Pod init container GPUs":     `{"kind":"Pod","metadata":{},"spec":{"initContainers":[{"name":"i","resources":{"requests":{"nvidia.com/gpu":"1"}}}],"containers":[{"name":"c"}]}}`,
		"bare Pod":                    `{"kind":"Pod","metadata":{},"spec":{"containers":[{"name":"c"}]}}`,
		"ResourceClaim":               `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com","count":16}}]}}}`,
		"opted-out ResourceClaimTemplate": `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaimTemplate","metadata":{"annotations":{"modelgate.io/inject":"false"}},` +
			`"spec":{"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.nvidia.com","allocationMode":"All"}}]}}}}`,
	}
	namespaces := map[string]map[string]string{
		"plain":             nil,
		"injection enabled": {annotations.NamespaceInjection: annotations.InjectionEnabled},
		"widened":           {PolicyScopeLabel: PolicyScopeAll},
		"enabled and widened": {annotations.NamespaceInjection: annotations.InjectionEnabled,
			PolicyScopeLabel: PolicyScopeAll},
	}
	for oname, obj := range objects {
		for nname, ns := range namespaces {
			t.Run(oname+" in "+nname, func(t *testing.T) {
				want, by := sentByCEL(t, hooks, obj, ns)
				if len(by) > 1 {
					t.Errorf("sent by %v: an object must reach one webhook at most", by)
				}
				got, why, err := SentToPolicies([]byte(obj), ns, "nvidia.com/gpu")
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("SentToPolicies = %v (%s), the webhook configuration says %v (%v)", got, why, want, by)
				}
			})
		}
	}
}
