package celform

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// maxGPUs is a WorkloadPolicy with a CEL form: at most parameters.max GPUs.
func maxGPUs(edit func(*policyv1.WorkloadPolicy)) *policyv1.WorkloadPolicy {
	wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "max-gpus", UID: "u-1"}}
	wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 2, "note": "per pod", "products": ["a", 1]}`)}
	wp.Spec.CEL = &policyv1.CELForm{Validations: []policyv1.CELValidation{{
		Expression:        "variables.gpus <= variables.parameters.max",
		MessageExpression: "'asks for ' + string(variables.gpus) + ' GPUs, more than ' + string(variables.parameters.max)",
	}}}
	if edit != nil {
		edit(wp)
	}
	return wp
}

func TestGenerate(t *testing.T) {
	scope := Scope{ExcludedNamespaces: []string{"kube-system", "modelgate-system"}}
	cases := map[string]struct {
		edit        func(*policyv1.WorkloadPolicy)
		wantRules   []string
		wantActions []admissionregistrationv1.ValidationAction
		wantFailure admissionregistrationv1.FailurePolicyType
		wantNS      *metav1.LabelSelector
	}{
		"defaults: every workload kind, deny, fail": {
			wantRules:   []string{"/v1/pods", "apps/v1/deployments", "apps/v1/statefulsets", "batch/v1/jobs", "batch/v1/cronjobs"},
			wantActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			wantFailure: admissionregistrationv1.Fail,
			wantNS: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: namespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "modelgate-system"}}}},
		},
		"kinds listed, AIInference judged by its Deployment; warn; allow on failure": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.Match.Kinds = []string{"Pod", "AIInference", "ResourceClaimTemplate"}
				wp.Spec.EnforcementAction = policyv1.EnforcementActionWarn
				wp.Spec.FailurePolicy = policyv1.FailurePolicyAllow
			},
			wantRules:   []string{"/v1/pods", "resource.k8s.io/v1/resourceclaimtemplates"},
			wantActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Warn},
			wantFailure: admissionregistrationv1.Ignore,
			wantNS: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: namespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "modelgate-system"}}}},
		},
		"namespaces, exclusions and a selector, ANDed; dry run is audit": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.Match.Kinds = []string{"Deployment"}
				wp.Spec.Match.Namespaces = []string{"team-a", "team-b"}
				wp.Spec.Match.ExcludedNamespaces = []string{"team-b", "kube-system"}
				wp.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gpu"}}
				wp.Spec.EnforcementAction = policyv1.EnforcementActionDryRun
			},
			wantRules:   []string{"apps/v1/deployments"},
			wantActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit},
			wantFailure: admissionregistrationv1.Fail,
			wantNS: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gpu"}, MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: namespaceLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"team-a", "team-b"}},
				{Key: namespaceLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "modelgate-system", "team-b"}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wp := maxGPUs(tc.edit)
			vap, binding, err := Generate(wp, testKeys, scope)
			if err != nil {
				t.Fatal(err)
			}
			var rules []string
			for _, r := range vap.Spec.MatchConstraints.ResourceRules {
				rules = append(rules, r.APIGroups[0]+"/"+r.APIVersions[0]+"/"+r.Resources[0])
			}
			if diff := cmp.Diff(tc.wantRules, rules); diff != "" {
				t.Errorf("resource rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantActions, binding.Spec.ValidationActions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if *vap.Spec.FailurePolicy != tc.wantFailure {
				t.Errorf("failurePolicy %s, want %s", *vap.Spec.FailurePolicy, tc.wantFailure)
			}
			if diff := cmp.Diff(tc.wantNS, binding.Spec.MatchResources.NamespaceSelector); diff != "" {
				t.Errorf("namespace selector (-want +got):\n%s", diff)
			}
			for _, m := range []metav1.ObjectMeta{vap.ObjectMeta, binding.ObjectMeta} {
				if m.Name != "modelgate-max-gpus" || m.Labels[PolicyLabel] != "max-gpus" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].UID != "u-1" {
					t.Errorf("metadata %+v: want modelgate-max-gpus, labelled and owned by the WorkloadPolicy", m)
				}
			}
			if binding.Spec.PolicyName != vap.Name {
				t.Errorf("the binding names %s, want %s", binding.Spec.PolicyName, vap.Name)
			}
			if got := vap.Spec.Validations[0].Message; got != "[max-gpus] failed expression: variables.gpus <= variables.parameters.max" {
				t.Errorf("message %q", got)
			}
		})
	}
}

// TestName: a name too long for the prefix is shortened, keeping apart two
// names that share their first 243 characters.
func TestName(t *testing.T) {
	a, b := strings.Repeat("a", 250)+"x", strings.Repeat("a", 250)+"y"
	if len(Name(a)) > 253 || Name(a) == Name(b) {
		t.Errorf("Name(%d chars) = %q (%d), Name of the other = %q", len(a), Name(a), len(Name(a)), Name(b))
	}
	if Name("p") != "modelgate-p" {
		t.Errorf("Name(p) = %q", Name("p"))
	}
}

// TestJudge: the generated policy decides as its WorkloadPolicy says, in
// the API server's own CEL: the parameters reach it, the message names the
// policy, the action follows enforcementAction, and the match and the
// scope's exclusions select the objects.
func TestJudge(t *testing.T) {
	pod := func(ns string, gpus int64) *unstructured.Unstructured {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}
		return toUnstructured(t, p)
	}
	deployment := func(ns string, gpus int64) *unstructured.Unstructured {
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: ns}}
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}
		return toUnstructured(t, d)
	}
	const denied = "[max-gpus] asks for 4 GPUs, more than 2"
	cases := map[string]struct {
		edit   func(*policyv1.WorkloadPolicy)
		obj    *unstructured.Unstructured
		old    *unstructured.Unstructured
		labels map[string]string
		want   Decision
	}{
		"within the limit":           {obj: pod("team-a", 2), want: Decision{Matched: true}},
		"over the limit":             {obj: pod("team-a", 4), want: Decision{Matched: true, Deny: []string{denied}}},
		"a Deployment's template":    {obj: deployment("team-a", 4), want: Decision{Matched: true, Deny: []string{denied}}},
		"an UPDATE, judged as it is": {obj: pod("team-a", 4), old: pod("team-a", 1), want: Decision{Matched: true, Deny: []string{denied}}},
		"warn": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.EnforcementAction = policyv1.EnforcementActionWarn },
			obj: pod("team-a", 4), want: Decision{Matched: true, Warn: []string{denied}}},
		"dry run": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.EnforcementAction = policyv1.EnforcementActionDryRun },
			obj: pod("team-a", 4), want: Decision{Matched: true, Audit: []string{denied}}},
		"an excluded namespace of the scope": {obj: pod("kube-system", 4), want: Decision{}},
		"a namespace the match leaves out": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.Match.Namespaces = []string{"team-b"} },
			obj: pod("team-a", 4), want: Decision{}},
		"a namespace selector that matches": {edit: func(wp *policyv1.WorkloadPolicy) {
			wp.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gpu"}}
		}, obj: pod("team-a", 4), labels: map[string]string{"tier": "gpu"}, want: Decision{Matched: true, Deny: []string{denied}}},
		"a kind the match leaves out": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.Match.Kinds = []string{"Deployment"} },
			obj: pod("team-a", 4), want: Decision{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wp := maxGPUs(tc.edit)
			if errs := Check(wp, testKeys); len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			vap, binding, err := Generate(wp, testKeys, Scope{ExcludedNamespaces: []string{"kube-system"}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := Compile(vap, binding)
			if err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{namespaceLabel: tc.obj.GetNamespace()}
			for k, v := range tc.labels {
				labels[k] = v
			}
			op := admission.Create
			if tc.old != nil {
				op = admission.Update
			}
			got, err := p.Judge(context.Background(), Request{Object: tc.obj, OldObject: tc.old, Operation: op,
				Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.obj.GetNamespace(), Labels: labels}}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}
