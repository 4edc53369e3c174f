package celform

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/yaml"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// words is s with its whitespace runs made one space: YAML folds the
// shipped expressions onto one line.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestScopeAsTheWebhooks holds WebhookScope's pieces to the shipped
// validating webhooks: the same match conditions, and the namespace labels
// that split them.
func TestScopeAsTheWebhooks(t *testing.T) {
	data, err := os.ReadFile("../../config/webhook/validating-selectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		conditions []string
		selector   []metav1.LabelSelectorRequirement
	}{
		"namespace.validate.modelgate.io": {
			conditions: []string{notAnUpdatePoliciesCannotSee, namespaceOptedIn},
			selector: []metav1.LabelSelectorRequirement{
				{Key: injectionLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"enabled"}},
				{Key: policyScopeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"all"}},
				{Key: ignoreLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			},
		},
		"workload.validate.modelgate.io": {
			conditions: []string{notAnUpdatePoliciesCannotSee, workloadOptedIn},
			selector: []metav1.LabelSelectorRequirement{
				{Key: injectionLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"enabled"}},
				{Key: policyScopeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"all"}},
				{Key: ignoreLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			},
		},
		"scope.validate.modelgate.io": {
			conditions: []string{notAnUpdatePoliciesCannotSee},
			selector: []metav1.LabelSelectorRequirement{
				{Key: policyScopeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"all"}},
				{Key: ignoreLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
			},
		},
	}
	if len(cfg.Webhooks) != len(want) {
		t.Fatalf("%d validating webhooks, want %d: WebhookScope must learn the new one", len(cfg.Webhooks), len(want))
	}
	for _, w := range cfg.Webhooks {
		exp, ok := want[w.Name]
		if !ok {
			t.Errorf("webhook %s: WebhookScope does not know it", w.Name)
			continue
		}
		var got []string
		for _, c := range w.MatchConditions {
			got = append(got, words(c.Expression))
		}
		var wantConds []string
		for _, c := range exp.conditions {
			wantConds = append(wantConds, words(c))
		}
		if diff := cmp.Diff(wantConds, got); diff != "" {
			t.Errorf("webhook %s: match conditions differ from WebhookScope's (-scope +shipped):\n%s", w.Name, diff)
		}
		// The names the webhooks leave out are the Configuration's, which
		// WebhookScope is given; the rest of the selector must agree.
		var sel []metav1.LabelSelectorRequirement
		for _, r := range w.NamespaceSelector.MatchExpressions {
			if r.Key != namespaceLabel {
				sel = append(sel, r)
			}
		}
		if diff := cmp.Diff(exp.selector, sel); diff != "" {
			t.Errorf("webhook %s: namespace selector (-scope +shipped):\n%s", w.Name, diff)
		}
	}
}

// TestWebhookScopeSelects: the generated policies, with WebhookScope, judge
// what the webhooks would send: an opted-in or GPU workload, everything in
// a policy-scope=all namespace, what does not opt out in an injection
// namespace; nothing in an ignored or excluded namespace.
func TestWebhookScopeSelects(t *testing.T) {
	wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "never"}}
	wp.Spec.CEL = &policyv1.CELForm{Validations: []policyv1.CELValidation{{Expression: "false", Message: "judged"}}}
	vap, binding, err := Generate(wp, testKeys, WebhookScope([]string{"kube-system", "modelgate-system"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(vap, binding)
	if err != nil {
		t.Fatal(err)
	}
	deployment := func(ns string, annotations map[string]string, gpus int64) *appsv1.Deployment {
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}}
		d.Spec.Template.Annotations = annotations
		c := corev1.Container{Name: "c", Image: "i"}
		if gpus > 0 {
			c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
		}
		d.Spec.Template.Spec.Containers = []corev1.Container{c}
		return d
	}
	optIn, optOut := map[string]string{"modelgate.io/inject": "true"}, map[string]string{"modelgate.io/inject": "false"}
	cases := map[string]struct {
		obj    *appsv1.Deployment
		labels map[string]string
		want   bool
	}{
		"a plain workload":                                 {obj: deployment("team-a", nil, 0)},
		"a workload that opts in":                          {obj: deployment("team-a", optIn, 0), want: true},
		"a GPU workload":                                   {obj: deployment("team-a", nil, 1), want: true},
		"a plain workload in an injection namespace":       {obj: deployment("team-a", nil, 0), labels: map[string]string{injectionLabel: "enabled"}, want: true},
		"one that opts out of an injection namespace":      {obj: deployment("team-a", optOut, 0), labels: map[string]string{injectionLabel: "enabled"}},
		"a plain workload in a policy-scope=all namespace": {obj: deployment("team-a", nil, 0), labels: map[string]string{policyScopeLabel: "all"}, want: true},
		"a GPU workload in an ignored namespace":           {obj: deployment("team-a", nil, 1), labels: map[string]string{ignoreLabel: ""}},
		"a GPU workload in an excluded namespace":          {obj: deployment("kube-system", nil, 1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			labels := map[string]string{namespaceLabel: tc.obj.Namespace}
			for k, v := range tc.labels {
				labels[k] = v
			}
			d, err := p.Judge(context.Background(), Request{Object: toUnstructured(t, tc.obj), Operation: admission.Create,
				Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.obj.Namespace, Labels: labels}}})
			if err != nil {
				t.Fatal(err)
			}
			if judged := len(d.Deny) > 0; judged != tc.want {
				t.Errorf("judged = %v (%+v), want %v", judged, d, tc.want)
			}
		})
	}
}
