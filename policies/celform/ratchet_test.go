package celform

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
)

// TestRatchet: a policy that denies judges an UPDATE by what it
// introduces, as modelgate ratchets its Rego: a violation the old object
// had too, with the same message, is let through; a new one, or a worse
// one whose message differs, still denies; a CREATE is judged as before.
// spec.ratchet false, and a warning policy, judge an UPDATE as a CREATE.
func TestRatchet(t *testing.T) {
	pod := func(gpus int64, labels map[string]string, containers ...string) *unstructured.Unstructured {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a", Labels: labels}}
		if len(containers) == 0 {
			containers = []string{"c"}
		}
		for _, c := range containers {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}})
		}
		return toUnstructured(t, p)
	}
	deployment := func(replicas int32, gpus int64) *unstructured.Unstructured {
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "team-a"}}
		d.Spec.Replicas = ptr.To(replicas)
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}
		return toUnstructured(t, d)
	}
	deny := func(msgs ...string) Decision { return Decision{Matched: true, Deny: msgs} }
	allow := Decision{Matched: true}
	// ownVariable moves the rule into a variable of the form's own, read
	// through another that reads the object, as a policy author writes it.
	ownVariable := func(wp *policyv1.WorkloadPolicy) {
		wp.Spec.CEL.Variables = []policyv1.CELVariable{
			{Name: "asked", Expression: "variables.gpus"},
			{Name: "over", Expression: "variables.asked > variables.parameters.max"},
		}
		wp.Spec.CEL.Validations[0].Expression = "!variables.over"
		wp.Spec.CEL.Validations[0].MessageExpression = "'asks for ' + string(variables.asked) + ' GPUs, more than ' + string(variables.parameters.max)"
	}
	// perContainer names each container in a comprehension whose variable
	// is called object: the object inside is the container, not the Pod.
	perContainer := func(wp *policyv1.WorkloadPolicy) {
		wp.Spec.CEL.Validations = []policyv1.CELValidation{{
			Expression: "variables.containers.all(object, object.name != 'bad') && object.metadata.name == 'p'",
			Message:    "has a container named bad",
		}}
	}
	cases := map[string]struct {
		edit     func(*policyv1.WorkloadPolicy)
		obj, old *unstructured.Unstructured
		want     Decision
	}{
		"a CREATE over the limit":                          {obj: pod(4, nil), want: deny("[max-gpus] asks for 4 GPUs, more than 2")},
		"a CREATE within it":                               {obj: pod(2, nil), want: allow},
		"an UPDATE keeping the old violation (a label)":    {obj: pod(4, map[string]string{"a": "b"}), old: pod(4, nil), want: allow},
		"an UPDATE introducing a violation":                {obj: pod(4, nil), old: pod(1, nil), want: deny("[max-gpus] asks for 4 GPUs, more than 2")},
		"an UPDATE making the violation worse (a message)": {obj: deployment(1, 8), old: deployment(1, 4), want: deny("[max-gpus] asks for 8 GPUs, more than 2")},
		"scaling a Deployment that already violates":       {obj: deployment(5, 4), old: deployment(1, 4), want: allow},
		"an UPDATE within the limit":                       {obj: pod(1, nil), old: pod(4, nil), want: allow},
		"the form's own variables, read on the old object too": {edit: ownVariable,
			obj: deployment(5, 4), old: deployment(1, 4), want: allow},
		"the form's own variables: a new violation still denies": {edit: ownVariable,
			obj: deployment(1, 4), old: deployment(1, 1), want: deny("[max-gpus] asks for 4 GPUs, more than 2")},
		"a comprehension's variable named object is not the old object": {edit: perContainer,
			obj: pod(0, map[string]string{"a": "b"}, "bad"), old: pod(0, nil, "bad"), want: allow},
		"a comprehension's variable named object: a new violation denies": {edit: perContainer,
			obj: pod(0, nil, "bad"), old: pod(0, nil, "good"), want: deny("[max-gpus] has a container named bad")},
		"a static message ratchets a worse value": {edit: func(wp *policyv1.WorkloadPolicy) {
			wp.Spec.CEL.Validations[0].MessageExpression, wp.Spec.CEL.Validations[0].Message = "", "too many GPUs"
		}, obj: deployment(1, 8), old: deployment(1, 4), want: allow},
		"ratchet: false judges an UPDATE as a CREATE": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.Ratchet = ptr.To(false) },
			obj: pod(4, map[string]string{"a": "b"}), old: pod(4, nil), want: deny("[max-gpus] asks for 4 GPUs, more than 2")},
		"a warning policy is not ratcheted, as in modelgate": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.EnforcementAction = policyv1.EnforcementActionWarn },
			obj: pod(4, map[string]string{"a": "b"}), old: pod(4, nil), want: Decision{Matched: true, Warn: []string{"[max-gpus] asks for 4 GPUs, more than 2"}}},
		"the old object cannot be judged: the denial stands": {edit: func(wp *policyv1.WorkloadPolicy) {
			wp.Spec.CEL.Validations[0].Expression = "object.metadata.?labels[?'x'].orValue('') != '' && variables.gpus <= variables.parameters.max"
			wp.Spec.CEL.Validations[0].MessageExpression = "'asks for ' + string(variables.gpus) + ' GPUs, labelled ' + object.metadata.labels['x']"
		}, obj: pod(4, map[string]string{"x": "y"}), old: pod(4, nil), want: deny("[max-gpus] failed expression: " +
			"object.metadata.?labels[?'x'].orValue('') != '' && variables.gpus <= variables.parameters.max")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wp := maxGPUs(tc.edit)
			if errs := Check(wp, testKeys); len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			vap, binding, err := Generate(wp, testKeys, Scope{})
			if err != nil {
				t.Fatal(err)
			}
			compiles(t, vap)
			p, err := Compile(vap, binding)
			if err != nil {
				t.Fatal(err)
			}
			op := admission.Create
			if tc.old != nil {
				op = admission.Update
			}
			got, err := p.Judge(context.Background(), Request{Object: tc.obj, OldObject: tc.old, Operation: op})
			if err != nil {
				t.Fatal(err)
			}
			// An evaluation error is reported in the API server's words.
			for i, m := range got.Deny {
				if strings.Contains(m, "resulted in error") {
					got.Deny[i] = "[max-gpus] failed expression: " + wp.Spec.CEL.Validations[0].Expression
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOnOld: an expression read on the old object names oldObject where it
// named the admitted object, and the copies of the variables that read the
// object; a comprehension's own variables of those names are left alone,
// and macros are printed back as written.
func TestOnOld(t *testing.T) {
	rename := map[string]string{"gpus": "old_gpus", "podSpec": "old_podSpec"}
	cases := map[string]struct {
		expr, want string
		wantErr    error
	}{
		"object":                       {expr: "object.spec.replicas > 1", want: "oldObject.spec.replicas > 1"},
		"a variable copied":            {expr: "variables.gpus <= variables.parameters.max", want: "variables.old_gpus <= variables.parameters.max"},
		"optional selects":             {expr: "object.?spec.?replicas.orValue(1) + variables.?gpus.orValue(0)", want: `oldObject.?spec.?replicas.orValue(1) + variables.?old_gpus.orValue(0)`},
		"has()":                        {expr: "has(object.spec) && has(variables.podSpec.containers)", want: "has(oldObject.spec) && has(variables.old_podSpec.containers)"},
		"a comprehension's object":     {expr: "object.spec.containers.all(object, object.name != '')", want: `oldObject.spec.containers.all(object, object.name != "")`},
		"a comprehension's variables":  {expr: "[1].exists(variables, variables == variables)", want: "[1].exists(variables, variables == variables)"},
		"nested, two-variable macros":  {expr: "variables.podSpec.containers.transformList(i, c, c.name + string(i)).exists(n, n in object.metadata.labels)", want: `variables.old_podSpec.containers.transformList(i, c, c.name + string(i)).exists(n, n in oldObject.metadata.labels)`},
		"oldObject is left as it is":   {expr: "object == oldObject", want: "oldObject == oldObject"},
		"strings are requoted exactly": {expr: `object.metadata.name == 'a"\'\\'`, want: `oldObject.metadata.name == "a\"'\\"`},
		"variables read whole":         {expr: "variables == variables", wantErr: errBareVariables},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := parse(tc.expr)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("parse: error %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got, err := p.onOld(rename)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("on the old object:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestCheckOldNames: a form's own variable may not take the name of a
// copy read on the old object; any other name starting with old may.
func TestCheckOldNames(t *testing.T) {
	cases := map[string]struct {
		names   []string
		wantErr bool
	}{
		"a copy of modelgate's":      {names: []string{"old_gpus"}, wantErr: true},
		"a copy of the form's own":   {names: []string{"over", "old_over"}, wantErr: true},
		"old_ of no variable":        {names: []string{"old_count"}},
		"the author's own old names": {names: []string{"oldPodSpec", "oldGPUs"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wp := maxGPUs(func(wp *policyv1.WorkloadPolicy) {
				for _, n := range tc.names {
					wp.Spec.CEL.Variables = append(wp.Spec.CEL.Variables, policyv1.CELVariable{Name: n, Expression: "oldObject != null"})
				}
			})
			errs := Check(wp, testKeys)
			if got := len(errs) > 0; got != tc.wantErr {
				t.Errorf("Check = %v, want an error: %t", errs, tc.wantErr)
			}
		})
	}
}

// FuzzQuote: quote(s) is a CEL string literal of s (of its UTF-8, each
// invalid byte sequence read as U+FFFD), whatever s holds: the CEL parser
// reads it back as one string literal, never as more CEL.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "bench", `a" || true || "`, `\`, `\"`, "'", "\n\r\t\a\b\f\v", "\x00\x7f", "é✓😀", "\xff\xfe", "\u2028", "${x}", "`", "a\\u0022"} {
		f.Add(s)
	}
	prs, err := celParser()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, errs := prs.Parse(common.NewTextSource(quote(s)))
		if len(errs.GetErrors()) > 0 {
			t.Fatalf("quote(%q) = %s does not parse: %s", s, quote(s), errs.ToDisplayString())
		}
		e := a.Expr()
		if e.Kind() != ast.LiteralKind {
			t.Fatalf("quote(%q) = %s is not a literal", s, quote(s))
		}
		got, ok := e.AsLiteral().(types.String)
		if want := strings.ToValidUTF8(s, "\uFFFD"); !ok || string(got) != want {
			t.Errorf("quote(%q) = %s reads as %v, want %q", s, quote(s), e.AsLiteral(), want)
		}
	})
}
