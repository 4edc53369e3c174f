package webhook

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/mutators"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

var (
	optIn  = map[string]string{annotations.Inject: "true"}
	optOut = map[string]string{annotations.Inject: "false"}
	maybe  = map[string]string{annotations.Inject: "maybe"}
	forged = map[string]string{annotations.OwnerLabel: "mallory"}
)

func deployment(ns string, o builders.Options) func(t testing.TB) admission.Request {
	return func(t testing.TB) admission.Request { return create(t, object("Deployment", ns, o), alice) }
}

func TestHandle(t *testing.T) {
	owned := builders.Options{Labels: map[string]string{annotations.OwnerLabel: aliceLabel}}
	changedOwner := builders.Options{Labels: map[string]string{annotations.OwnerLabel: "bob"}}
	type want struct {
		allowed   bool
		patched   bool
		code      int32
		reason    metav1.StatusReason
		msgPrefix string
		contains  []string
	}
	cases := map[string]struct {
		req  func(t testing.TB) admission.Request
		want want
	}{
		"opted in": {
			req:  deployment(nsPlain, builders.Options{Annotations: optIn}),
			want: want{allowed: true, patched: true},
		},
		"opted in on the template": {
			req:  deployment(nsPlain, builders.Options{TemplateAnnotations: optIn}),
			want: want{allowed: true, patched: true},
		},
		"namespace opted in": {
			req:  deployment(nsEnabled, builders.Options{}),
			want: want{allowed: true, patched: true},
		},
		"not opted in": {
			req:  deployment(nsPlain, builders.Options{}),
			want: want{allowed: true},
		},
		"opted out in an opted-in namespace": {
			req:  deployment(nsEnabled, builders.Options{Annotations: optIn, TemplateAnnotations: optOut}),
			want: want{allowed: true},
		},
		"bad inject value": {
			req: deployment(nsPlain, builders.Options{Annotations: maybe}),
			want: want{code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid,
				contains: []string{"metadata.annotations[modelgate.io/inject]", `"maybe"`, `"true"`, `"false"`}},
		},
		"two bad inject values": {
			req: deployment(nsPlain, builders.Options{Annotations: maybe, TemplateAnnotations: map[string]string{annotations.Inject: "TRUE"}}),
			want: want{code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid, contains: []string{
				"metadata.annotations[modelgate.io/inject]", `"maybe"`,
				"spec.template.metadata.annotations[modelgate.io/inject]", `"TRUE"`}},
		},
		"excluded namespace": {
			req:  deployment("kube-system", builders.Options{Annotations: maybe}),
			want: want{allowed: true},
		},
		"modelgate's own namespace": {
			req:  deployment(config.New().Namespace, builders.Options{Annotations: maybe}),
			want: want{allowed: true},
		},
		"ignored namespace": {
			req:  deployment(nsIgnored, builders.Options{Annotations: optIn}),
			want: want{allowed: true},
		},
		"delete": {
			req: func(t testing.TB) admission.Request {
				return request("Deployment", admissionv1.Delete, nsPlain, nil, toJSON(t, object("Deployment", nsPlain, builders.Options{})), alice)
			},
			want: want{allowed: true},
		},
		"connect": {
			req: func(testing.TB) admission.Request {
				return request("Pod", admissionv1.Connect, nsPlain, nil, nil, alice)
			},
			want: want{allowed: true},
		},
		"unknown kind": {
			req: func(t testing.TB) admission.Request {
				r := deployment(nsPlain, builders.Options{Annotations: maybe})(t)
				r.Kind.Kind = "ReplicaSet"
				return r
			},
			want: want{allowed: true},
		},
		"undecodable object": {
			req: func(testing.TB) admission.Request {
				return request("Deployment", admissionv1.Create, nsPlain, []byte(`{"metadata":`), nil, alice)
			},
			want: want{code: http.StatusBadRequest},
		},
		"wrongly typed object": {
			req: func(testing.TB) admission.Request {
				return request("Pod", admissionv1.Create, nsPlain, []byte(`{"metadata":[]}`), nil, alice)
			},
			want: want{code: http.StatusBadRequest},
		},
		"empty object": {
			req: func(testing.TB) admission.Request {
				return request("Deployment", admissionv1.Create, nsPlain, nil, nil, alice)
			},
			want: want{code: http.StatusBadRequest},
		},
		"empty old object on update": {
			req: func(t testing.TB) admission.Request {
				return request("Deployment", admissionv1.Update, nsPlain, toJSON(t, object("Deployment", nsPlain, builders.Options{})), nil, alice)
			},
			want: want{code: http.StatusBadRequest, contains: []string{"old object"}},
		},
		"forged owner by a user": {
			req: deployment(nsPlain, builders.Options{Labels: forged}),
			want: want{code: http.StatusForbidden, reason: metav1.StatusReasonForbidden, msgPrefix: "[reserved-metadata] ",
				contains: []string{"metadata.labels[modelgate.io/owner]"}},
		},
		"forged owner on an opted-out object": {
			req: deployment(nsEnabled, builders.Options{Annotations: optOut, TemplateLabels: forged}),
			want: want{code: http.StatusForbidden, msgPrefix: "[reserved-metadata] ",
				contains: []string{"spec.template.metadata.labels[modelgate.io/owner]"}},
		},
		"forged owner and full name, every line tagged": {
			req: deployment(nsPlain, builders.Options{Labels: forged,
				TemplateAnnotations: map[string]string{annotations.OwnerFull: "mallory@evil.example"}}),
			want: want{code: http.StatusForbidden, msgPrefix: "[reserved-metadata] ",
				contains: []string{"\n[reserved-metadata] spec.template.metadata.annotations[modelgate.io/owner-full]"}},
		},
		// A template modelgate never sealed (a ReplicaSet a user wrote)
		// passes no owner on: the controller's copy loses it.
		"forged owner by a trusted controller": {
			req: func(t testing.TB) admission.Request {
				return create(t, object("Deployment", nsPlain, builders.Options{Labels: forged}), rsCtrl, "system:serviceaccounts")
			},
			want: want{allowed: true, patched: true},
		},
		"update that changes the owner": {
			req: func(t testing.TB) admission.Request {
				return update(t, object("Deployment", nsPlain, owned), object("Deployment", nsPlain, changedOwner), alice)
			},
			want: want{code: http.StatusForbidden, msgPrefix: "[reserved-metadata] ",
				contains: []string{"metadata.labels[modelgate.io/owner]", `"alice_example.com"`}},
		},
		"update that removes the owner": {
			req: func(t testing.TB) admission.Request {
				return update(t, object("Deployment", nsPlain, owned), object("Deployment", nsPlain, builders.Options{}), alice)
			},
			want: want{code: http.StatusForbidden, msgPrefix: "[reserved-metadata] "},
		},
		"update that keeps the owner": {
			req: func(t testing.TB) admission.Request {
				return update(t, object("Deployment", nsPlain, owned), object("Deployment", nsPlain, owned), bob)
			},
			want: want{allowed: true},
		},
		"namespace lookup fails": {
			req:  deployment(nsBroken, builders.Options{Annotations: optIn}),
			want: want{code: http.StatusInternalServerError, contains: []string{errNoNamespace.Error()}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := newHandler().Handle(context.Background(), tc.req(t))
			if resp.Allowed != tc.want.allowed {
				t.Fatalf("allowed = %v, want %v (result %+v)", resp.Allowed, tc.want.allowed, resp.Result)
			}
			if got := len(patchesOf(resp)) > 0; got != tc.want.patched {
				t.Errorf("patched = %v, want %v: %v", got, tc.want.patched, patchPaths(resp))
			}
			if tc.want.allowed {
				return
			}
			if resp.Result == nil {
				t.Fatal("denied without a Result")
			}
			if resp.Result.Code != tc.want.code {
				t.Errorf("code = %d, want %d (message %q)", resp.Result.Code, tc.want.code, resp.Result.Message)
			}
			if tc.want.reason != "" && resp.Result.Reason != tc.want.reason {
				t.Errorf("reason = %q, want %q", resp.Result.Reason, tc.want.reason)
			}
			if !strings.HasPrefix(resp.Result.Message, tc.want.msgPrefix) {
				t.Errorf("message %q does not start with %q", resp.Result.Message, tc.want.msgPrefix)
			}
			for _, s := range tc.want.contains {
				if !strings.Contains(resp.Result.Message, s) {
					t.Errorf("message %q does not contain %q", resp.Result.Message, s)
				}
			}
		})
	}
}

func TestHandleInvalidListsEveryCause(t *testing.T) {
	obj := object("CronJob", nsPlain, builders.Options{Annotations: maybe, TemplateAnnotations: map[string]string{annotations.Inject: ""}})
	resp := newHandler().Handle(context.Background(), create(t, obj, alice))
	if resp.Allowed || resp.Result == nil || resp.Result.Details == nil {
		t.Fatalf("want a denial with details, got %+v", resp.AdmissionResponse)
	}
	var got []string
	for _, c := range resp.Result.Details.Causes {
		got = append(got, c.Field)
	}
	want := []string{
		"metadata.annotations[modelgate.io/inject]",
		"spec.jobTemplate.spec.template.metadata.annotations[modelgate.io/inject]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&metav1.StatusDetails{Group: "batch", Kind: "CronJob", Name: "server", Causes: resp.Result.Details.Causes},
		resp.Result.Details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
}

// metaPrefixes are the JSON pointers of each kind's metadata, in Metas order.
var metaPrefixes = map[string][]string{
	"Pod":         {"/metadata"},
	"Deployment":  {"/metadata", "/spec/template/metadata"},
	"StatefulSet": {"/metadata", "/spec/template/metadata"},
	"Job":         {"/metadata", "/spec/template/metadata"},
	"CronJob":     {"/metadata", "/spec/jobTemplate/metadata", "/spec/jobTemplate/spec/template/metadata"},
}

func TestHandleInjects(t *testing.T) {
	for _, kind := range builders.Kinds {
		t.Run(kind, func(t *testing.T) {
			obj := object(kind, nsPlain, builders.Options{TemplateAnnotations: optIn, TemplateLabels: map[string]string{"tier": "gpu"}})
			req := create(t, obj, alice)
			resp := newHandler().Handle(context.Background(), req)
			if !resp.Allowed || len(patchesOf(resp)) == 0 {
				t.Fatalf("want an allowed patch, got allowed=%v result=%+v", resp.Allowed, resp.Result)
			}
			for _, p := range patchPaths(resp) {
				if !slices.ContainsFunc(metaPrefixes[kind], func(pre string) bool { return strings.HasPrefix(p, pre+"/") }) {
					t.Errorf("patch touches %s, outside the metadata", p)
				}
			}
			for _, pre := range metaPrefixes[kind] {
				if !slices.ContainsFunc(patchPaths(resp), func(p string) bool { return strings.HasPrefix(p, pre+"/labels") }) {
					t.Errorf("patch does not touch %s/labels: %v", pre, patchPaths(resp))
				}
			}

			before := metasOf(t, kind, req.Object.Raw)
			after := metasOf(t, kind, applyPatch(t, req.Object.Raw, resp))
			record := mutators.Record{Mutators: []string{mutators.OwnerMetadataName}, Settings: annotations.Settings{}.Hash()}.String()
			for i := range after {
				wantLabels := merged(before[i].Labels, map[string]string{
					annotations.OwnerLabel: aliceLabel, annotations.TeamLabel: teamName})
				wantAnnos := merged(before[i].Annotations, map[string]string{
					annotations.OwnerFull: alice, annotations.Injected: record,
					annotations.Seal: seal.Ephemeral().Sign(nsPlain, after[i])})
				if diff := cmp.Diff(wantLabels, after[i].Labels); diff != "" {
					t.Errorf("%s labels (-want +got):\n%s", metaPrefixes[kind][i], diff)
				}
				if diff := cmp.Diff(wantAnnos, after[i].Annotations); diff != "" {
					t.Errorf("%s annotations (-want +got):\n%s", metaPrefixes[kind][i], diff)
				}
			}
		})
	}
}

func TestHandlePodUpdateRestoresOwner(t *testing.T) {
	h := newHandler()
	first := create(t, object("Pod", nsPlain, builders.Options{Annotations: optIn}), alice)
	injected := applyPatch(t, first.Object.Raw, h.Handle(context.Background(), first))
	old := decodeAs(t, "Pod", injected)

	cur := old.DeepCopyObject().(client.Object)
	labels := cur.GetLabels()
	delete(labels, annotations.OwnerLabel)
	cur.SetLabels(labels)
	req := update(t, old, cur, bob)

	resp := h.Handle(context.Background(), req)
	if !resp.Allowed || len(patchesOf(resp)) == 0 {
		t.Fatalf("want an allowed patch, got allowed=%v result=%+v", resp.Allowed, resp.Result)
	}
	got := decodeAs(t, "Pod", applyPatch(t, req.Object.Raw, resp))
	if diff := cmp.Diff(old.GetLabels(), got.GetLabels()); diff != "" {
		t.Errorf("labels after the patch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(old.GetAnnotations(), got.GetAnnotations()); diff != "" {
		t.Errorf("annotations after the patch (-want +got):\n%s", diff)
	}
}

// TestHandleIdempotentThroughJSON admits an object, applies the patch as
// the API server would, and admits the result again (a reinvocation, a
// later UPDATE, and for workloads the Pod a controller stamps from the
// injected template): none of them patches anything.
func TestHandleIdempotentThroughJSON(t *testing.T) {
	h := newHandler()
	for _, kind := range builders.Kinds {
		t.Run(kind, func(t *testing.T) {
			req := create(t, object(kind, nsPlain, builders.Options{TemplateAnnotations: optIn}), alice)
			injected := applyPatch(t, req.Object.Raw, h.Handle(context.Background(), req))
			if string(injected) == string(req.Object.Raw) {
				t.Fatal("the first review patched nothing")
			}
			again := map[string]admission.Request{
				"reinvocation": request(kind, admissionv1.Create, nsPlain, injected, nil, alice),
				"update":       request(kind, admissionv1.Update, nsPlain, injected, injected, bob),
			}
			if kind != "Pod" {
				tpl := metasOf(t, kind, injected)
				pod := object("Pod", nsPlain, builders.Options{Labels: tpl[len(tpl)-1].Labels, Annotations: tpl[len(tpl)-1].Annotations})
				again["pod from the template"] = create(t, pod, rsCtrl, "system:serviceaccounts")
			}
			for name, r := range again {
				resp := h.Handle(context.Background(), r)
				if !resp.Allowed || len(patchesOf(resp)) > 0 {
					t.Errorf("%s: allowed=%v patches=%v result=%+v, want allowed without patches",
						name, resp.Allowed, patchPaths(resp), resp.Result)
				}
			}
		})
	}
}

func merged(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}

// TestHandleWarnings checks modelgate's own advice on what it injects:
// returned as admission warnings in the policies' "[name] message" form,
// with the patch, on every admission that runs the full chain, and never on
// a Pod a controller stamps from the template.
func TestHandleWarnings(t *testing.T) {
	const (
		otherModel = `[modelgate] container "server" names the model "meta-llama/Llama-3.1-70B-Instruct" (vllm serve), which is neither ` +
			`the repository of modelgate.io/model ("meta-llama/Llama-3.1-8B-Instruct") nor a path under modelgate.io/model-mount (/models): ` +
			`it would serve that model, not the one modelgate loads`
		lowMemory = `[modelgate] container "server" has a memory limit of 8Gi, below modelgate.io/model-size (20Gi): with modelgate.io/model-cache: memory ` +
			`the model is a tmpfs whose pages count against the pod's memory once the loader exits; raise the limit to cover the model and the engine`
	)
	hf := merged(optIn, map[string]string{annotations.Model: "hf://meta-llama/Llama-3.1-8B-Instruct", annotations.ModelSize: "20Gi"})
	inMemory := merged(hf, map[string]string{annotations.ModelCache: "memory"})
	cases := map[string]struct {
		annos  map[string]string
		server func(c *corev1.Container)
		want   []string
	}{
		"the annotated model": {
			annos: hf, server: func(c *corev1.Container) { c.Command = []string{"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"} },
		},
		"another model": {
			annos: hf, server: func(c *corev1.Container) { c.Command = []string{"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"} },
			want: []string{otherModel},
		},
		"a memory cache over the container's limit": {
			annos: inMemory,
			server: func(c *corev1.Container) {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}
			},
			want: []string{lowMemory},
		},
		"not opted in": {
			annos:  map[string]string{annotations.Model: "hf://meta-llama/Llama-3.1-8B-Instruct"},
			server: func(c *corev1.Container) { c.Command = []string{"vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"} },
		},
	}
	h := newHandler()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := object("Deployment", nsPlain, builders.Options{TemplateAnnotations: tc.annos}).(*appsv1.Deployment)
			tc.server(&d.Spec.Template.Spec.Containers[0])
			req := create(t, d, alice)
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if diff := cmp.Diff(tc.want, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tc.annos[annotations.Inject] != "true" {
				return
			}
			injected := applyPatch(t, req.Object.Raw, resp)
			again := h.Handle(context.Background(), request("Deployment", admissionv1.Update, nsPlain, injected, injected, alice))
			if len(patchesOf(again)) > 0 {
				t.Errorf("update of the output patched %v", patchPaths(again))
			}
			if diff := cmp.Diff(tc.want, again.Warnings); diff != "" {
				t.Errorf("warnings on update of the output (-want +got):\n%s", diff)
			}

			tpl := metasOf(t, "Deployment", injected)[1]
			pod := object("Pod", nsPlain, builders.Options{Labels: tpl.Labels, Annotations: tpl.Annotations}).(*corev1.Pod)
			pod.Spec = *decodeAs(t, "Deployment", injected).(*appsv1.Deployment).Spec.Template.Spec.DeepCopy()
			stamped := h.Handle(context.Background(), create(t, pod, rsCtrl, "system:serviceaccounts"))
			if !stamped.Allowed || len(stamped.Warnings) > 0 {
				t.Errorf("a Pod stamped from the template: allowed=%v warnings=%v, want allowed without warnings", stamped.Allowed, stamped.Warnings)
			}
		})
	}
}
