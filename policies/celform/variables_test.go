package celform

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies/workload"
)

// testKeys are NVIDIA's names, the Configuration's defaults.
var testKeys = Keys{GPUResource: "nvidia.com/gpu", ProductLabel: "nvidia.com/gpu.product"}

// probed are modelgate's variables a probe reads back, each as a string.
var probed = map[string]string{
	VarGPUs:        `string(variables.gpus)`,
	VarGPUProducts: `variables.gpuProducts.join(',')`,
	VarModel:       `variables.model`,
	VarModelScheme: `variables.modelScheme`,
	VarModelHost:   `variables.modelHost`,
	VarModelBucket: `variables.modelBucket`,
	VarOwner:       `variables.owner`,
	VarTeam:        `variables.team`,
	VarClaims:      `variables.claims.join(',')`,
}

// probeNames are probed's keys in a fixed order.
var probeNames = func() []string {
	out := make([]string, 0, len(probed))
	for k := range probed {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}()

// probe is a policy whose every validation fails with a message holding
// one of modelgate's variables: the API server's own evaluation reads them
// back.
func probe(t testing.TB) *Policy {
	t.Helper()
	wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
	wp.Spec.CEL = &policyv1.CELForm{}
	for _, name := range probeNames {
		wp.Spec.CEL.Validations = append(wp.Spec.CEL.Validations, policyv1.CELValidation{
			Expression: "false", MessageExpression: `'` + name + `=' + ` + probed[name],
		})
	}
	if errs := Check(wp, testKeys); len(errs) > 0 {
		t.Fatalf("the probe does not compile: %v", errs.ToAggregate())
	}
	vap, binding, err := Generate(wp, testKeys, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(vap, binding)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// variablesOf reads modelgate's variables for obj through the probe.
func variablesOf(t testing.TB, p *Policy, obj runtime.Object) map[string]string {
	t.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Judge(context.Background(), Request{Object: &unstructured.Unstructured{Object: u}, Operation: admission.Create})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Deny) != len(probeNames) {
		t.Fatalf("the probe gave %d messages, want %d: %q", len(d.Deny), len(probeNames), d.Deny)
	}
	out := map[string]string{}
	for i, m := range d.Deny {
		name, value, ok := strings.Cut(strings.TrimPrefix(m, "[probe] "), "=")
		if !ok {
			t.Fatalf("variables.%s failed to evaluate (message %q) on %+v", probeNames[i], m, obj)
		}
		out[name] = value
	}
	return out
}

// viewVariables are the same values as the policy view has them.
func viewVariables(v *workload.View, claims []string) map[string]string {
	out := map[string]string{
		VarGPUs:        strconv.FormatInt(v.GPU.Count, 10),
		VarGPUProducts: strings.Join(v.GPU.Products, ","),
		VarOwner:       v.Owner,
		VarTeam:        v.Team,
		VarClaims:      strings.Join(claims, ","),
	}
	var m workload.Model
	if v.Model != nil {
		m = *v.Model
	}
	out[VarModel], out[VarModelScheme], out[VarModelHost], out[VarModelBucket] = m.URI, m.Scheme, m.Host, m.Bucket
	return out
}

// TestVariablesAsTheView: on generated workloads of every kind, modelgate's
// CEL variables, evaluated by the API server's own CEL, equal the policy
// view's fields they stand for (the GPU count with sidecars and MIG
// instances, the products from the annotation or the node affinity, the
// model's scheme, host and bucket, the owner and team).
func TestVariablesAsTheView(t *testing.T) {
	p := probe(t)
	r := rand.New(rand.NewPCG(42, 7))
	compared := 0
	for i := range 400 {
		obj, meta, spec, metas := genObject(r, i)
		var sources []annotations.Source
		for j := len(metas) - 1; j >= 0; j-- { // outermost first
			sources = append(sources, annotations.Source{Path: field.NewPath("metadata"), Annotations: metas[j].Annotations})
		}
		settings, errs := annotations.Parser{}.Parse(sources...)
		if len(errs) > 0 {
			continue // the webhook refuses the object as invalid
		}
		v := workload.Build(workload.Source{
			Kind: obj.GetObjectKind().GroupVersionKind().Kind, Object: meta, PodMeta: metas[0], PodSpec: spec,
			Settings: settings, Sealed: true,
			GPU: workload.GPUKeys{ResourceName: corev1.ResourceName(testKeys.GPUResource), ProductLabel: testKeys.ProductLabel},
		})
		var claims []string
		for _, c := range spec.ResourceClaims {
			claims = append(claims, c.Name)
		}
		got := variablesOf(t, p, obj)
		want := viewVariables(v, claims)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("workload %d (%s): CEL variables differ from the view (-view +cel):\n%s\nobject: %+v", i, v.Kind, diff, obj)
		}
		compared++
	}
	if compared < 300 {
		t.Fatalf("only %d of 400 generated workloads compared: the generator makes too many invalid ones", compared)
	}
}

// genObject is a random workload of a random kind with what the variables
// read varied: GPU limits and requests (MIG instances too), sidecars and
// init containers, node affinity on the product label, modelgate.io
// annotations on the object or the pod template, owner and team labels,
// resource claims. It returns the object, its metadata, its pod spec and
// every metadata innermost first.
func genObject(r *rand.Rand, i int) (runtime.Object, *metav1.ObjectMeta, *corev1.PodSpec, []*metav1.ObjectMeta) {
	spec := corev1.PodSpec{}
	for j := range 1 + r.IntN(3) {
		spec.Containers = append(spec.Containers, genContainer(r, fmt.Sprintf("c%d", j)))
	}
	for j := range r.IntN(4) {
		c := genContainer(r, fmt.Sprintf("i%d", j))
		if r.IntN(2) == 0 {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		spec.InitContainers = append(spec.InitContainers, c)
	}
	if r.IntN(3) == 0 {
		spec.Affinity = genAffinity(r)
	}
	for j := range r.IntN(2) {
		spec.ResourceClaims = append(spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("claim-%d", j), ResourceClaimTemplateName: ptr.To("t")})
	}
	meta := metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i), Namespace: "team-a", Labels: genLabels(r), Annotations: genAnnotations(r)}
	tpl := metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: genAnnotations(r)}
	tm := func(kind, apiVersion string) metav1.TypeMeta {
		return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}
	}
	switch r.IntN(5) {
	case 0:
		p := &corev1.Pod{TypeMeta: tm("Pod", "v1"), ObjectMeta: meta, Spec: spec}
		return p, &p.ObjectMeta, &p.Spec, []*metav1.ObjectMeta{&p.ObjectMeta}
	case 1:
		d := &appsv1.Deployment{TypeMeta: tm("Deployment", "apps/v1"), ObjectMeta: meta}
		d.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: tpl, Spec: spec}
		return d, &d.ObjectMeta, &d.Spec.Template.Spec, []*metav1.ObjectMeta{&d.Spec.Template.ObjectMeta, &d.ObjectMeta}
	case 2:
		s := &appsv1.StatefulSet{TypeMeta: tm("StatefulSet", "apps/v1"), ObjectMeta: meta}
		s.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: tpl, Spec: spec}
		return s, &s.ObjectMeta, &s.Spec.Template.Spec, []*metav1.ObjectMeta{&s.Spec.Template.ObjectMeta, &s.ObjectMeta}
	case 3:
		j := &batchv1.Job{TypeMeta: tm("Job", "batch/v1"), ObjectMeta: meta}
		j.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: tpl, Spec: spec}
		return j, &j.ObjectMeta, &j.Spec.Template.Spec, []*metav1.ObjectMeta{&j.Spec.Template.ObjectMeta, &j.ObjectMeta}
	default:
		c := &batchv1.CronJob{TypeMeta: tm("CronJob", "batch/v1"), ObjectMeta: meta}
		c.Spec.JobTemplate.ObjectMeta = metav1.ObjectMeta{Annotations: genAnnotations(r)}
		c.Spec.JobTemplate.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: tpl, Spec: spec}
		jt := &c.Spec.JobTemplate
		return c, &c.ObjectMeta, &jt.Spec.Template.Spec, []*metav1.ObjectMeta{&jt.Spec.Template.ObjectMeta, &jt.ObjectMeta, &c.ObjectMeta}
	}
}

func genContainer(r *rand.Rand, name string) corev1.Container {
	c := corev1.Container{Name: name, Image: "i"}
	lists := []*corev1.ResourceList{&c.Resources.Limits, &c.Resources.Requests}
	names := []corev1.ResourceName{"nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "cpu", "amd.com/gpu"}
	for range r.IntN(4) {
		l := lists[r.IntN(2)]
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		n := names[r.IntN(len(names))]
		q := resource.MustParse(strconv.Itoa(r.IntN(5)))
		(*l)[n] = q
	}
	if r.IntN(5) == 0 {
		c.Resources.Claims = []corev1.ResourceClaim{{Name: "claim-0"}}
	}
	return c
}

var products = []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4", "Tesla-T4"}

func genAffinity(r *rand.Rand) *corev1.Affinity {
	ns := &corev1.NodeSelector{}
	for range 1 + r.IntN(2) { // the API server requires a term
		var t corev1.NodeSelectorTerm
		for range r.IntN(3) {
			req := corev1.NodeSelectorRequirement{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpIn}
			switch r.IntN(4) {
			case 0:
				req.Key = "zone"
			case 1:
				req.Operator = corev1.NodeSelectorOpNotIn
			}
			for range 1 + r.IntN(3) {
				req.Values = append(req.Values, products[r.IntN(len(products))])
			}
			t.MatchExpressions = append(t.MatchExpressions, req)
		}
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, t)
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}}
}

var models = []string{
	"hf://meta-llama/Llama-3.1-8B-Instruct", "s3://weights/llama/8b", "gs://bucket-1/models/m", "https://models.example.com:8443/m.tar",
	"oci://registry.example.com/models/llama:v1", "pvc://model-cache/llama", "hf://org/model@0e9e39f249a16976918f6564b8830bc894c89659",
}

func genAnnotations(r *rand.Rand) map[string]string {
	a := map[string]string{}
	if r.IntN(3) == 0 {
		a[annotations.Model] = models[r.IntN(len(models))]
	}
	if r.IntN(4) == 0 {
		var ps []string
		for range 1 + r.IntN(2) {
			ps = append(ps, products[r.IntN(len(products))])
		}
		a[annotations.GPUProduct] = strings.Join(ps, ",")
		a[annotations.GPU] = strconv.Itoa(1 + r.IntN(2)) // gpu-product requires it
	}
	return a
}

func genLabels(r *rand.Rand) map[string]string {
	l := map[string]string{}
	if r.IntN(2) == 0 {
		l[annotations.OwnerLabel] = "alice"
	}
	if r.IntN(2) == 0 {
		l[annotations.TeamLabel] = "ml"
	}
	return l
}
