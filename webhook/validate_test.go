package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// validating is a Validating handler over the policies, compiled from
// name -> module with the action and failure policy given.
func validating(t *testing.T, ps ...policies.Policy) *Validating {
	t.Helper()
	e := policies.NewEngine(policies.Options{})
	var cs []*policies.Compiled
	for _, p := range ps {
		c, err := policies.Compile(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		cs = append(cs, c)
	}
	e.Swap(policies.NewSet(cs...))
	return NewValidating(config.New(), e, testNamespaces, NewPolicyMetrics(nil))
}

const (
	denyAll  = "package t\n\ndeny contains \"no deployments here\" if input.workload.kind == \"Deployment\"\n"
	warnLong = "package t\n\nwarn contains \"first line\\n   second line\" if true\n"
	conflict = "package t\n\nx := 1 if true\n\nx := 2 if true\n\ndeny contains \"never\" if x == 3\n"
)

func TestValidatingDecisions(t *testing.T) {
	dep := func() admission.Request {
		return create(t, object("Deployment", nsPlain, builders.Options{Annotations: optIn}), alice)
	}
	cases := map[string]struct {
		policies     []policies.Policy
		req          func() admission.Request
		wantAllowed  bool
		wantCode     int32
		wantMessage  string
		wantWarnings []string
	}{
		"no policies: allowed": {req: dep, wantAllowed: true},
		"deny: 403 with [policy] message": {
			policies:    []policies.Policy{{Name: "no-deploy", Module: denyAll}},
			req:         dep,
			wantCode:    http.StatusForbidden,
			wantMessage: "[no-deploy] no deployments here",
		},
		"two denials: one line each, by policy name": {
			policies: []policies.Policy{{Name: "b-second", Module: denyAll}, {Name: "a-first", Module: denyAll}},
			req:      dep, wantCode: http.StatusForbidden,
			wantMessage: "[a-first] no deployments here\n[b-second] no deployments here",
		},
		"warn action: allowed with the warning": {
			policies:     []policies.Policy{{Name: "soft", Module: denyAll, Action: policies.ActionWarn}},
			req:          dep,
			wantAllowed:  true,
			wantWarnings: []string{"[soft] no deployments here"},
		},
		"dry run: allowed, nothing shown": {
			policies:    []policies.Policy{{Name: "trial", Module: denyAll, Action: policies.ActionDryRun}},
			req:         dep,
			wantAllowed: true,
		},
		"a multi-line warning is folded onto one line": {
			policies:     []policies.Policy{{Name: "long", Module: warnLong}},
			req:          dep,
			wantAllowed:  true,
			wantWarnings: []string{"[long] first line second line"},
		},
		"evaluation error, failurePolicy deny: denied": {
			policies: []policies.Policy{{Name: "broken", Module: conflict}},
			req:      dep, wantCode: http.StatusForbidden,
			wantMessage: "[broken] policy evaluation failed",
		},
		"evaluation error, failurePolicy allow: a warning": {
			policies:     []policies.Policy{{Name: "broken", Module: conflict, FailurePolicy: policies.FailAllow}},
			req:          dep,
			wantAllowed:  true,
			wantWarnings: []string{"[broken] policy evaluation failed"},
		},
		"excluded namespace: not evaluated": {
			policies: []policies.Policy{{Name: "no-deploy", Module: denyAll}},
			req: func() admission.Request {
				return create(t, object("Deployment", "kube-system", builders.Options{}), alice)
			},
			wantAllowed: true,
		},
		"ignored namespace: not evaluated": {
			policies:    []policies.Policy{{Name: "no-deploy", Module: denyAll}},
			req:         func() admission.Request { return create(t, object("Deployment", nsIgnored, builders.Options{}), alice) },
			wantAllowed: true,
		},
		"a kind modelgate does not handle: allowed": {
			policies: []policies.Policy{{Name: "no-deploy", Module: denyAll}},
			req: func() admission.Request {
				r := dep()
				r.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
				return r
			},
			wantAllowed: true,
		},
		"DELETE: not validated": {
			policies: []policies.Policy{{Name: "no-deploy", Module: denyAll}},
			req: func() admission.Request {
				r := dep()
				r.Operation = admissionv1.Delete
				return r
			},
			wantAllowed: true,
		},
		"undecodable object: 400": {
			req: func() admission.Request {
				r := dep()
				r.Object.Raw = []byte(`{"spec": 7}`)
				return r
			},
			wantCode: http.StatusBadRequest,
		},
		"namespace labels unavailable: 500, modelgate's fault": {
			req:      func() admission.Request { return create(t, object("Deployment", nsBroken, builders.Options{}), alice) },
			wantCode: http.StatusInternalServerError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := validating(t, tc.policies...)
			resp := h.Handle(context.Background(), tc.req())
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !tc.wantAllowed {
				if resp.Result.Code != tc.wantCode {
					t.Errorf("code = %d, want %d (%s)", resp.Result.Code, tc.wantCode, resp.Result.Message)
				}
				if !strings.HasPrefix(resp.Result.Message, tc.wantMessage) {
					t.Errorf("message = %q, want it to start with %q", resp.Result.Message, tc.wantMessage)
				}
			}
			var got []string
			for _, w := range resp.Warnings {
				if i := strings.Index(w, " policy evaluation failed"); i >= 0 {
					w = w[:i+len(" policy evaluation failed")]
				}
				got = append(got, w)
			}
			if diff := cmp.Diff(tc.wantWarnings, got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// The policies see the object as the mutating webhook left it, through the
// documented view: the serving container resolved, the model parsed, the
// GPU count read from the injected limits.
func TestValidatingView(t *testing.T) {
	h := validating(t)
	view := captureView(t, h, injectedReview(t))
	var v struct {
		Kind             string `json:"kind"`
		Operation        string `json:"operation"`
		Owner            string `json:"owner"`
		Team             string `json:"team"`
		Injected         bool   `json:"injected"`
		ServingContainer string `json:"servingContainer"`
		Engine           string `json:"engine"`
		GPU              struct {
			Count    int      `json:"count"`
			Products []string `json:"products"`
		} `json:"gpu"`
		Model struct {
			Scheme string `json:"scheme"`
			Org    string `json:"org"`
			Pinned bool   `json:"pinned"`
		} `json:"model"`
		InitContainers []struct {
			Name string `json:"name"`
		} `json:"initContainers"`
	}
	if err := json.Unmarshal(view, &v); err != nil {
		t.Fatalf("decoding the view: %v: %s", err, view)
	}
	checks := map[string][2]any{
		"kind":             {"Deployment", v.Kind},
		"operation":        {"CREATE", v.Operation},
		"owner":            {aliceLabel, v.Owner},
		"team":             {teamName, v.Team},
		"injected":         {true, v.Injected},
		"servingContainer": {"server", v.ServingContainer},
		"engine":           {"vllm", v.Engine},
		"gpu.count":        {1, v.GPU.Count},
		"gpu.products":     {"NVIDIA-H100-80GB-HBM3", strings.Join(v.GPU.Products, ",")},
		"model.scheme":     {"hf", v.Model.Scheme},
		"model.org":        {"meta-llama", v.Model.Org},
		"model.pinned":     {true, v.Model.Pinned},
	}
	for field, c := range checks {
		if c[0] != c[1] {
			t.Errorf("workload.%s = %v, want %v", field, c[1], c[0])
		}
	}
	if len(v.InitContainers) == 0 || v.InitContainers[0].Name != "model-loader" {
		t.Errorf("initContainers = %+v, want the injected model-loader first", v.InitContainers)
	}
}

func TestPolicyValidator(t *testing.T) {
	const good = "package t\n\ndeny contains \"x\" if input.workload.gpu.count > input.parameters.max\n"
	cases := map[string]struct {
		edit        func(*policyv1.WorkloadPolicy)
		wantAllowed bool
		wantFields  []string
		wantDetail  string
	}{
		"a valid policy": {wantAllowed: true},
		"a parse error: spec.rego with line and column": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.Rego = "package t\n\ndeny contains msg if {\n\tmsg := \n}\n"
			},
			wantFields: []string{"spec.rego"},
			wantDetail: "5:1: rego_parse_error",
		},
		"no deny or warn rule": {
			edit:       func(wp *policyv1.WorkloadPolicy) { wp.Spec.Rego = "package t\n\nallow := true\n" },
			wantFields: []string{"spec.rego"},
			wantDetail: "deny",
		},
		"an unknown function: a compile error with its position": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.Rego = "package t\n\ndeny contains x if x := nosuch.fn(1)\n"
			},
			wantFields: []string{"spec.rego"},
			wantDetail: "3:",
		},
		"parameters that are not an object": {
			edit:       func(wp *policyv1.WorkloadPolicy) { wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`[1, 2]`)} },
			wantFields: []string{"spec"},
			wantDetail: "spec.parameters",
		},
		"an invalid namespace selector": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team", Operator: "Near"}}}
			},
			wantFields: []string{"spec"},
			wantDetail: "namespaceSelector",
		},
		"a CEL form that compiles": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.CEL = &policyv1.CELForm{Validations: []policyv1.CELValidation{{
					Expression:        "variables.gpus <= variables.parameters.max",
					MessageExpression: "'asks for ' + string(variables.gpus) + ' GPUs'",
				}}}
			},
			wantAllowed: true,
		},
		"a CEL form that does not compile, with broken Rego: every problem at once": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.Rego = "package gpus\n\ndeny contains msg if {\n"
				wp.Spec.CEL = &policyv1.CELForm{
					Variables: []policyv1.CELVariable{{Name: "big", Expression: "variables.gpus >"}},
					Validations: []policyv1.CELValidation{
						{Expression: "variables.nope.size() < 2"},
						{Expression: "true", MessageExpression: "1 +"},
					},
				}
			},
			wantFields: []string{"spec.rego", "spec.cel.variables[0].expression", "spec.cel.validations[0].expression", "spec.cel.validations[1].messageExpression"},
			wantDetail: "undefined field 'nope'",
		},
		"a CEL variable named as one of modelgate's": {
			edit: func(wp *policyv1.WorkloadPolicy) {
				wp.Spec.CEL = &policyv1.CELForm{
					Variables:   []policyv1.CELVariable{{Name: "gpus", Expression: "1"}},
					Validations: []policyv1.CELValidation{{Expression: "true"}},
				}
			},
			wantFields: []string{"spec.cel.variables[0].name"},
			wantDetail: "is one of modelgate's variables",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wp := &policyv1.WorkloadPolicy{ObjectMeta: metav1.ObjectMeta{Name: "gpus"}}
			wp.Spec.Rego = good
			wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"max": 8}`)}
			if tc.edit != nil {
				tc.edit(wp)
			}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Kind: metav1.GroupVersionKind{Group: "policy.modelgate.io", Version: "v1", Kind: "WorkloadPolicy"}, Name: wp.Name,
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: toJSON(t, wp)},
			}}
			resp := PolicyValidator{}.Handle(context.Background(), req)
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantAllowed {
				return
			}
			if resp.Result.Code != http.StatusUnprocessableEntity {
				t.Errorf("code = %d, want 422", resp.Result.Code)
			}
			var fields []string
			for _, c := range resp.Result.Details.Causes {
				fields = append(fields, c.Field)
			}
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			if !strings.Contains(resp.Result.Message, tc.wantDetail) {
				t.Errorf("message %q does not contain %q", resp.Result.Message, tc.wantDetail)
			}
		})
	}
}

// Issue 15, item 5: after a policy is tightened, the metadata-only updates
// that finish a Pod (a finalizer removed, its deletion) are not judged;
// a change to what the policies read is. The policies do not ratchet
// here, so that "judged" shows as a denial (TestValidatingRatchet).
func TestValidatingPodCleanup(t *testing.T) {
	const noGPUs = "package t\n\ndeny contains \"no GPU pods\" if input.workload.gpu.count > 0\n"
	h := validating(t, policies.Policy{Name: "no-gpus", Module: noGPUs, NoRatchet: true})
	pod := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := object("Pod", nsPlain, builders.Options{}).(*corev1.Pod)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		p.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		if edit != nil {
			edit(p)
		}
		return p
	}
	old := pod(nil)
	cases := map[string]struct {
		cur         *corev1.Pod
		wantAllowed bool
	}{
		"a finalizer removed": {cur: pod(func(p *corev1.Pod) { p.Finalizers = nil }), wantAllowed: true},
		"being deleted": {cur: pod(func(p *corev1.Pod) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Labels["x"] = "y"
		}), wantAllowed: true},
		"a label changed: judged":  {cur: pod(func(p *corev1.Pod) { p.Labels["tier"] = "gold" })},
		"the spec changed: judged": {cur: pod(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example.com/llm/server:2.0" })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), update(t, old, tc.cur, alice))
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("allowed %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
		})
	}
	if resp := h.Handle(context.Background(), create(t, old, alice)); resp.Allowed {
		t.Error("the policy does not deny the GPU Pod on CREATE: the cases above prove nothing")
	}

	// A toleration added (a Pod's tolerations may grow) is outside the
	// view: not judged when the policies read the view only, judged when
	// one reads the raw object, whose whole spec is then compared.
	tolerated := pod(func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
	})
	if resp := h.Handle(context.Background(), update(t, old, tolerated, alice)); !resp.Allowed {
		t.Errorf("a toleration added, the view only read: %+v, want allowed unjudged", resp.Result)
	}
	const rawReader = "package t\n\ndeny contains \"no GPU pods\" if {\n\tinput.workload.gpu.count > 0\n\tinput.object.metadata.name != \"\"\n}\n"
	hRaw := validating(t, policies.Policy{Name: "no-gpus-raw", Module: rawReader, NoRatchet: true})
	if resp := hRaw.Handle(context.Background(), update(t, old, tolerated, alice)); resp.Allowed {
		t.Error("a toleration added, the raw object read: allowed, want judged and denied")
	}
	if resp := hRaw.Handle(context.Background(), update(t, old, pod(func(p *corev1.Pod) { p.Finalizers = nil }), alice)); !resp.Allowed {
		t.Errorf("a finalizer removed, the raw object read: %+v, want allowed unjudged", resp.Result)
	}
}

// Issue 29, item 1: a tightened policy does not deny an UPDATE that keeps
// a violation the old object had (a controller's label on a running GPU
// Pod, an HPA's replicas): it warns, and counts it; a violation the update
// introduces still denies, and a policy with ratchet off judges the update
// as new.
func TestValidatingRatchet(t *testing.T) {
	const maxGPUs = "package t\n\ndeny contains sprintf(\"%d GPUs, more than 4\", [input.workload.gpu.count]) if input.workload.gpu.count > 4\n"
	const noLatest = "package t\n\ndeny contains \"no :latest images\" if {\n\tsome c in input.workload.containers\n\tendswith(c.image, \":latest\")\n}\n"
	pod := func(gpus string, edit func(*corev1.Pod)) *corev1.Pod {
		p := object("Pod", nsPlain, builders.Options{}).(*corev1.Pod)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}
		p.Labels = map[string]string{"app": "llm"}
		if edit != nil {
			edit(p)
		}
		return p
	}
	old := pod("8", nil)
	labelled := pod("8", func(p *corev1.Pod) { p.Labels["rollouts.argoproj.io/revision"] = "2" })
	h := validating(t, policies.Policy{Name: "max-gpus", Module: maxGPUs}, policies.Policy{Name: "no-latest", Module: noLatest})
	if resp := h.Handle(context.Background(), create(t, old, alice)); resp.Allowed {
		t.Fatal("the policy does not deny the 8-GPU Pod on CREATE: the cases below prove nothing")
	}

	resp := h.Handle(context.Background(), update(t, old, labelled, alice))
	if !resp.Allowed {
		t.Fatalf("a label added to a Pod that already had 8 GPUs: denied (%v), want allowed", resp.Result.Message)
	}
	want := []string{"[max-gpus] existing violation, not introduced by this update: 8 GPUs, more than 4"}
	if diff := cmp.Diff(want, resp.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.metrics.reviews.WithLabelValues("Pod", "UPDATE", outcomeRatcheted)); got != 1 {
		t.Errorf("reviews{outcome=ratcheted} = %v, want 1", got)
	}

	// Worse, or a new violation: denied, with only the new messages.
	worse := pod("16", nil)
	if resp := h.Handle(context.Background(), update(t, old, worse, alice)); resp.Allowed || resp.Result.Message != "[max-gpus] 16 GPUs, more than 4" {
		t.Errorf("16 GPUs where there were 8: %v %q, want denied for the new count", resp.Allowed, resp.Result.Message)
	}
	latest := pod("8", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example.com/llm/server:latest" })
	resp = h.Handle(context.Background(), update(t, old, latest, alice))
	if resp.Allowed || resp.Result.Message != "[no-latest] no :latest images" {
		t.Errorf("a :latest image introduced: %v %q, want denied for it alone", resp.Allowed, resp.Result.Message)
	}
	if !slices.Contains(resp.Warnings, want[0]) {
		t.Errorf("warnings %q: want the kept violation among them", resp.Warnings)
	}

	// ratchet: false judges the update as if the Pod were new.
	strict := validating(t, policies.Policy{Name: "max-gpus", Module: maxGPUs, NoRatchet: true})
	if resp := strict.Handle(context.Background(), update(t, old, labelled, alice)); resp.Allowed {
		t.Error("ratchet off: the label update is allowed, want denied")
	}
}

// Issue 29, item 1: whatever the kind, an object being deleted is not
// judged, and neither is an update that changes only who holds it
// (finalizers, owner references) or its status, even under a policy that
// does not ratchet; any other change is.
func TestValidatingOwnershipUpdates(t *testing.T) {
	const noGPUs = "package t\n\ndeny contains \"no GPU workloads\" if input.workload.gpu.count > 0\n"
	h := validating(t, policies.Policy{Name: "no-gpus", Module: noGPUs, NoRatchet: true})
	deployment := func(edit func(*appsv1.Deployment)) *appsv1.Deployment {
		d := object("Deployment", nsPlain, builders.Options{}).(*appsv1.Deployment)
		d.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		d.Labels = map[string]string{"app": "llm"}
		d.Finalizers = []string{"example.com/protect"}
		if edit != nil {
			edit(d)
		}
		return d
	}
	old := deployment(nil)
	cases := map[string]struct {
		cur         *appsv1.Deployment
		wantAllowed bool
	}{
		"a finalizer removed": {cur: deployment(func(d *appsv1.Deployment) { d.Finalizers = nil }), wantAllowed: true},
		"an owner reference added": {cur: deployment(func(d *appsv1.Deployment) {
			d.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Stack", Name: "s", UID: "u"}}
		}), wantAllowed: true},
		"the status changed": {cur: deployment(func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 1 }), wantAllowed: true},
		"being deleted, a label changed too": {cur: deployment(func(d *appsv1.Deployment) {
			now := metav1.Now()
			d.DeletionTimestamp = &now
			d.Labels["x"] = "y"
		}), wantAllowed: true},
		"a label changed: judged":      {cur: deployment(func(d *appsv1.Deployment) { d.Labels["tier"] = "gold" })},
		"the replicas changed: judged": {cur: deployment(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](3) })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), update(t, old, tc.cur, alice))
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("allowed %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
		})
	}
	if resp := h.Handle(context.Background(), create(t, old, alice)); resp.Allowed {
		t.Error("the policy does not deny the GPU Deployment on CREATE: the cases above prove nothing")
	}
}
