package celform

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// exception is a WorkloadPolicyException of team-a naming max-gpus.
func exception(name string, edit func(*policyv1.WorkloadPolicyException)) policyv1.WorkloadPolicyException {
	ex := policyv1.WorkloadPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}}
	ex.Spec.Policies = []string{"max-gpus"}
	ex.Spec.ExpiresAt = metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ex.Spec.Reason = "a benchmark"
	if edit != nil {
		edit(&ex)
	}
	return ex
}

// gpuLimits are 4 GPUs, over max-gpus' limit of 2.
var gpuLimits = corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(4, resource.DecimalSI)}}

// overPod is a Pod of team-a over the limit, with labels and a controller.
func overPod(name string, labels map[string]string, controller *metav1.OwnerReference) *corev1.Pod {
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: labels}}
	if controller != nil {
		p.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	p.Spec.Containers = []corev1.Container{{Name: "c", Resources: gpuLimits}}
	return p
}

// overDeployment is a Deployment of team-a over the limit.
func overDeployment(name string, labels, templateLabels map[string]string) *appsv1.Deployment {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: labels}}
	d.Spec.Template.Labels = templateLabels
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: gpuLimits}}
	return d
}

// overJob is a Job of team-a over the limit.
func overJob(name string, controller *metav1.OwnerReference) *batchv1.Job {
	j := &batchv1.Job{TypeMeta: metav1.TypeMeta{Kind: "Job", APIVersion: "batch/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}}
	if controller != nil {
		j.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	j.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Resources: gpuLimits}}
	return j
}

// controlledBy is a controller reference.
func controlledBy(kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "u", Controller: ptr.To(true)}
}

// TestExcepted: the generated policy admits what an exception naming the
// policy covers, and only that: its namespace, the object's kind and name
// or those of the workload that made it, the labels of the object or its
// pod template; values with quotes and backslashes are compared as
// written, never read as CEL.
func TestExcepted(t *testing.T) {
	const denied = "[max-gpus] asks for 4 GPUs, more than 2"
	deny := Decision{Matched: true, Deny: []string{denied}}
	allow := Decision{Matched: true}
	selector := func(s *metav1.LabelSelector) func(*policyv1.WorkloadPolicyException) {
		return func(ex *policyv1.WorkloadPolicyException) { ex.Spec.Match.LabelSelector = s }
	}
	expr := func(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	hostile := []string{`p" || true || "`, `p\" || true || \"`, `p' || true || '`, "p\\", "p\n", `p\u0022`}
	cases := map[string]struct {
		edit       func(*policyv1.WorkloadPolicy)
		exceptions []policyv1.WorkloadPolicyException
		obj        runtime.Object
		want       Decision
	}{
		"no exception":                         {obj: overPod("p", nil, nil), want: deny},
		"an exception for the whole namespace": {exceptions: []policyv1.WorkloadPolicyException{exception("all", nil)}, obj: overPod("p", nil, nil), want: allow},
		"another namespace's exception": {exceptions: []policyv1.WorkloadPolicyException{exception("b", func(ex *policyv1.WorkloadPolicyException) { ex.Namespace = "team-b" })},
			obj: overPod("p", nil, nil), want: deny},
		"an exception of another policy": {exceptions: []policyv1.WorkloadPolicyException{exception("o", func(ex *policyv1.WorkloadPolicyException) { ex.Spec.Policies = []string{"max-gpus-2"} })},
			obj: overPod("p", nil, nil), want: deny},
		"an exception of the policy directory's max-gpus": {exceptions: []policyv1.WorkloadPolicyException{exception("d", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.PolicySource = policyv1.PolicySourceDirectory
		})}, obj: overPod("p", nil, nil), want: deny},
		"the Pod by kind and name": {exceptions: []policyv1.WorkloadPolicyException{exception("n", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"Pod"}, []string{"q", "p"}
		})}, obj: overPod("p", nil, nil), want: allow},
		"near miss: another name": {exceptions: []policyv1.WorkloadPolicyException{exception("n", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"Pod"}, []string{"pp", "P", "p "}
		})}, obj: overPod("p", nil, nil), want: deny},
		"near miss: another kind": {exceptions: []policyv1.WorkloadPolicyException{exception("k", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"Deployment"}, []string{"p"}
		})}, obj: overPod("p", nil, nil), want: deny},
		"a Pod of a Deployment's ReplicaSet": {exceptions: []policyv1.WorkloadPolicyException{exception("w", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"Deployment"}, []string{"web"}
		})}, obj: overPod("web-5d4f7c9b8-x2k4z", map[string]string{"pod-template-hash": "5d4f7c9b8"}, controlledBy("ReplicaSet", "web-5d4f7c9b8")), want: allow},
		"near miss: a ReplicaSet not of that template hash": {exceptions: []policyv1.WorkloadPolicyException{exception("w", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"Deployment"}, []string{"web"}
		})}, obj: overPod("web-5d4f7c9b8-x2k4z", map[string]string{"pod-template-hash": "aaaa"}, controlledBy("ReplicaSet", "web-5d4f7c9b8")), want: deny},
		"near miss: an owner that is not the controller": {exceptions: []policyv1.WorkloadPolicyException{exception("s", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Names = []string{"db"}
		})}, obj: overPod("db-0", nil, &metav1.OwnerReference{Kind: "StatefulSet", Name: "db"}), want: deny},
		"a Pod of a StatefulSet": {exceptions: []policyv1.WorkloadPolicyException{exception("s", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"StatefulSet"}, []string{"db"}
		})}, obj: overPod("db-0", nil, controlledBy("StatefulSet", "db")), want: allow},
		"a Pod made by a CronJob, through its Job": {exceptions: []policyv1.WorkloadPolicyException{exception("c", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"CronJob"}, []string{"nightly"}
		})}, obj: overPod("nightly-28912345-abcde", nil, controlledBy("Job", "nightly-28912345")), want: allow},
		"near miss: a Job whose suffix is no CronJob's": {exceptions: []policyv1.WorkloadPolicyException{exception("c", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"CronJob"}, []string{"nightly"}
		})}, obj: overPod("nightly-1234567-abcde", nil, controlledBy("Job", "nightly-1234567")), want: deny},
		"the Pod's Job": {exceptions: []policyv1.WorkloadPolicyException{exception("j", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"Job"}, []string{"nightly-28912345"}
		})}, obj: overPod("nightly-28912345-abcde", nil, controlledBy("Job", "nightly-28912345")), want: allow},
		"a Job made by a CronJob": {exceptions: []policyv1.WorkloadPolicyException{exception("c", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Kinds, ex.Spec.Match.Names = []string{"CronJob"}, []string{"nightly"}
		})}, obj: overJob("nightly-28912345", controlledBy("CronJob", "nightly")), want: allow},
		"matchLabels on the object": {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}}))},
			obj: overPod("p", map[string]string{"app": "bench"}, nil), want: allow},
		"near miss: matchLabels of another value": {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}}))},
			obj: overPod("p", map[string]string{"app": "bench2"}, nil), want: deny},
		"matchLabels on the pod template": {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}}))},
			obj: overDeployment("d", nil, map[string]string{"app": "bench"}), want: allow},
		"near miss: matchLabels split between the object and its template": {exceptions: []policyv1.WorkloadPolicyException{exception("l",
			selector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench", "tier": "gpu"}}))},
			obj: overDeployment("d", map[string]string{"app": "bench"}, map[string]string{"tier": "gpu"}), want: deny},
		"In":                      {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpIn, "a", "bench")))}, obj: overPod("p", map[string]string{"app": "bench"}, nil), want: allow},
		"near miss: In":           {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpIn, "a", "b")))}, obj: overPod("p", map[string]string{"app": "bench"}, nil), want: deny},
		"NotIn":                   {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpNotIn, "a")))}, obj: overPod("p", map[string]string{"app": "bench"}, nil), want: allow},
		"NotIn, without the key":  {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpNotIn, "a")))}, obj: overPod("p", nil, nil), want: allow},
		"near miss: NotIn":        {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpNotIn, "a", "bench")))}, obj: overPod("p", map[string]string{"app": "bench"}, nil), want: deny},
		"Exists":                  {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpExists)))}, obj: overPod("p", map[string]string{"app": ""}, nil), want: allow},
		"near miss: Exists":       {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpExists)))}, obj: overPod("p", map[string]string{"ap": "x"}, nil), want: deny},
		"DoesNotExist":            {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpDoesNotExist)))}, obj: overPod("p", map[string]string{"ap": "x"}, nil), want: allow},
		"near miss: DoesNotExist": {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpDoesNotExist)))}, obj: overPod("p", map[string]string{"app": "x"}, nil), want: deny},
		"DoesNotExist on the template but not the object": {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpDoesNotExist)))},
			obj: overDeployment("d", map[string]string{"app": "x"}, nil), want: allow},
		"a selector that does not parse applies nowhere": {exceptions: []policyv1.WorkloadPolicyException{exception("l", selector(expr("app", metav1.LabelSelectorOpIn)))},
			obj: overPod("p", nil, nil), want: deny},
		"hostile names are compared as written": {exceptions: []policyv1.WorkloadPolicyException{exception("h", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Names = hostile
		})}, obj: overPod("p", nil, nil), want: deny},
		"a name with quotes and backslashes matches itself": {exceptions: []policyv1.WorkloadPolicyException{exception("h", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Names = hostile
		})}, obj: overPod(`p\" || true || \"`, nil, nil), want: allow},
		"a hostile label value": {exceptions: []policyv1.WorkloadPolicyException{exception("h", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": `x" || true || "`}}
		})}, obj: overPod("p", map[string]string{"app": "x"}, nil), want: deny},
		"a warn policy: an exception lifts nothing, as in modelgate": {edit: func(wp *policyv1.WorkloadPolicy) { wp.Spec.EnforcementAction = policyv1.EnforcementActionWarn },
			exceptions: []policyv1.WorkloadPolicyException{exception("all", nil)}, obj: overPod("p", nil, nil), want: Decision{Matched: true, Warn: []string{denied}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wp := maxGPUs(tc.edit)
			vap, binding, err := Generate(wp, testKeys, Scope{Exceptions: tc.exceptions})
			if err != nil {
				t.Fatal(err)
			}
			compiles(t, vap)
			p, err := Compile(vap, binding)
			if err != nil {
				t.Fatal(err)
			}
			obj := toUnstructured(t, tc.obj)
			got, err := p.Judge(context.Background(), Request{Object: obj, Operation: admission.Create})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

// compiles fails t unless the API server would accept vap's expressions,
// as it compiles a new ValidatingAdmissionPolicy.
func compiles(t *testing.T, vap *admissionregistrationv1.ValidatingAdmissionPolicy) {
	t.Helper()
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(Compatibility))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vap.Spec.Variables {
		if res := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, compileOptions, environment.NewExpressions); res.Error != nil {
			t.Errorf("variables.%s does not compile: %v\n%s", v.Name, res.Error, v.Expression)
		}
	}
	for i, v := range vap.Spec.Validations {
		if res := c.CompileCELExpression(&validating.ValidationCondition{Expression: v.Expression}, compileOptions, environment.NewExpressions); res.Error != nil {
			t.Errorf("validation %d does not compile: %v\n%s", i, res.Error, v.Expression)
		}
	}
}

// TestGenerateIsDeterministic: the exceptions in another order, and others
// that do not name the policy, make the same objects, so that applying
// them again changes nothing.
func TestGenerateIsDeterministic(t *testing.T) {
	es := []policyv1.WorkloadPolicyException{
		exception("b", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Match.Names = []string{"y", "x", "y"}
			ex.Spec.Match.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"z": "1", "a": "2"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "m", Operator: metav1.LabelSelectorOpIn, Values: []string{"q", "p"}}}}
		}),
		exception("a", nil),
		exception("c", func(ex *policyv1.WorkloadPolicyException) { ex.Namespace = "team-0" }),
	}
	other := exception("other", func(ex *policyv1.WorkloadPolicyException) { ex.Spec.Policies = []string{"another"} })
	want, _, err := Generate(maxGPUs(nil), testKeys, Scope{Exceptions: es})
	if err != nil {
		t.Fatal(err)
	}
	reordered := []policyv1.WorkloadPolicyException{es[2], other, es[0], es[1]}
	reordered[2].Spec.Match.LabelSelector.MatchExpressions[0].Values = []string{"p", "q"}
	got, _, err := Generate(maxGPUs(nil), testKeys, Scope{Exceptions: reordered})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("generated with the exceptions reordered (-want +got):\n%s", diff)
	}
	ex := variable(got, VarExcepted)
	if i, j := strings.Index(ex, `"team-0"`), strings.Index(ex, `"team-a"`); i < 0 || j < 0 || i > j {
		t.Errorf("excepted is not in the order of the exceptions' namespaces and names:\n%s", ex)
	}
}

// variable is the expression of the generated variable of that name.
func variable(vap *admissionregistrationv1.ValidatingAdmissionPolicy, name string) string {
	for _, v := range vap.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	return ""
}

// TestExceptedAsSubjectOf holds variables.excepted to what modelgate
// decides (validators.SubjectOf, policies.Exceptions.Except) on generated
// workloads and exceptions: Pods with and without controllers (ReplicaSets
// with and without their template hash, StatefulSets, Jobs with and without
// a CronJob's suffix), Deployments and Jobs with labels on the object and
// the template, and exceptions by namespace, kinds, names and every
// selector operator.
func TestExceptedAsSubjectOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 44))
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	some := func(vs ...string) []string {
		var out []string
		for _, v := range vs {
			if rng.IntN(3) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	labels := func() map[string]string {
		l := map[string]string{}
		for _, k := range some("app", "tier", "pod-template-hash") {
			l[k] = pick("a", "b", "5d4f7")
		}
		return l
	}
	names := []string{"web", "web-5d4f7", "db", "db-0", "nightly", "nightly-28912345", "nightly-123", "p"}
	kinds := []string{"Pod", "Deployment", "StatefulSet", "Job", "CronJob"}
	var objs []runtime.Object
	for range 120 {
		var controller *metav1.OwnerReference
		if rng.IntN(4) > 0 {
			controller = controlledBy(pick("ReplicaSet", "StatefulSet", "Job", "CronJob"), pick(names...))
			controller.Controller = ptr.To(rng.IntN(5) > 0)
		}
		switch rng.IntN(3) {
		case 0:
			objs = append(objs, overPod(pick(names...), labels(), controller))
		case 1:
			objs = append(objs, overDeployment(pick(names...), labels(), labels()))
		default:
			j := overJob(pick(names...), controller)
			j.Labels, j.Spec.Template.Labels = labels(), labels()
			objs = append(objs, j)
		}
	}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
	for i := range 30 {
		ex := exception(fmt.Sprintf("e%d", i), func(ex *policyv1.WorkloadPolicyException) {
			if rng.IntN(6) == 0 {
				ex.Namespace = "team-b"
			}
			ex.Spec.Match.Kinds = some(kinds...)
			ex.Spec.Match.Names = some(names...)
			if rng.IntN(2) == 0 {
				ls := &metav1.LabelSelector{}
				if rng.IntN(2) == 0 {
					ls.MatchLabels = map[string]string{pick("app", "tier"): pick("a", "b")}
				}
				for range rng.IntN(3) {
					r := metav1.LabelSelectorRequirement{Key: pick("app", "tier", "pod-template-hash"), Operator: ops[rng.IntN(len(ops))]}
					if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
						r.Values = some("a", "b", "5d4f7")
						if len(r.Values) == 0 {
							r.Values = []string{"a"}
						}
					}
					ls.MatchExpressions = append(ls.MatchExpressions, r)
				}
				ex.Spec.Match.LabelSelector = ls
			}
		})
		vap, binding, err := Generate(maxGPUs(nil), testKeys, Scope{Exceptions: []policyv1.WorkloadPolicyException{ex}})
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(vap, binding)
		if err != nil {
			t.Fatal(err)
		}
		e, err := validators.ExceptionOf(&ex)
		if err != nil {
			t.Fatal(err)
		}
		x := policies.NewExceptions(0, e)
		now := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
		covered := 0
		for _, obj := range objs {
			u := toUnstructured(t, obj)
			d := policies.Decision{Results: []policies.Result{{Policy: "max-gpus", Source: validators.SourceWorkloadPolicy,
				Action: policies.ActionDeny, Deny: []policies.Violation{{Msg: "m"}}}}}
			meta, podMeta := objectMetas(obj)
			s := validators.SubjectOf(u.GetKind(), "team-a", meta, podMeta)
			want := x.Except(&d, &s, now) > 0
			got, err := p.Judge(context.Background(), Request{Object: u, Operation: admission.Create})
			if err != nil {
				t.Fatal(err)
			}
			if want {
				covered++
			}
			if cel := len(got.Deny) == 0; cel != want {
				t.Errorf("exception %+v on %s %s (labels %v, owners %v): excepted in CEL %t, by modelgate %t",
					ex.Spec.Match, u.GetKind(), u.GetName(), u.GetLabels(), u.GetOwnerReferences(), cel, want)
			}
		}
		t.Logf("exception %d covers %d of %d objects", i, covered, len(objs))
	}
}

// objectMetas are the object's metadata and its pod template's, as the
// webhook gives them to validators.SubjectOf.
func objectMetas(obj runtime.Object) (meta, podMeta *metav1.ObjectMeta) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return &o.ObjectMeta, &o.ObjectMeta
	case *appsv1.Deployment:
		return &o.ObjectMeta, &o.Spec.Template.ObjectMeta
	case *batchv1.Job:
		return &o.ObjectMeta, &o.Spec.Template.ObjectMeta
	}
	panic(fmt.Sprintf("no metadata for %T", obj))
}

// TestExceptionsFor: the exceptions naming the policy, of its source,
// sorted.
func TestExceptionsFor(t *testing.T) {
	es := []policyv1.WorkloadPolicyException{
		exception("z", nil),
		exception("dir", func(ex *policyv1.WorkloadPolicyException) { ex.Spec.PolicySource = policyv1.PolicySourceDirectory }),
		exception("other", func(ex *policyv1.WorkloadPolicyException) { ex.Spec.Policies = []string{"a", "b"} }),
		exception("a", func(ex *policyv1.WorkloadPolicyException) {
			ex.Spec.Policies = []string{"a", "max-gpus"}
			ex.Spec.PolicySource = policyv1.PolicySourceWorkloadPolicy
		}),
		exception("b", func(ex *policyv1.WorkloadPolicyException) { ex.Namespace = "team-0" }),
	}
	var got []string
	for _, ex := range ExceptionsFor("max-gpus", es) {
		got = append(got, ex.Namespace+"/"+ex.Name)
	}
	if want := []string{"team-0/b", "team-a/a", "team-a/z"}; !slices.Equal(got, want) {
		t.Errorf("ExceptionsFor = %v, want %v", got, want)
	}
}
