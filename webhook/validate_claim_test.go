package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/gpuclaim"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/library"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// The requesters that copy claims from what was judged: the
// kube-controller-manager's resource claim controller, and modelgate.
var (
	claimCtrl = "system:serviceaccount:kube-system:resource-claim-controller"
	modelgate = config.New().ControllerUsername()
)

// gpuRequest is the request "gpu" for n devices of the GPU class (n 0 and mode All: every
// one of a node).
func gpuRequest(mode resourcev1.DeviceAllocationMode, n int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: mode, Count: n}}
}

// claimOf is a ResourceClaim, or a ResourceClaimTemplate, named name in
// nsPlain asking for the requests.
func claimOf(kind, name string, reqs ...resourcev1.DeviceRequest) runtime.Object {
	meta := metav1.ObjectMeta{Namespace: nsPlain, Name: name, CreationTimestamp: metav1.Now()}
	spec := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}
	if kind == "ResourceClaimTemplate" {
		t := &resourcev1.ResourceClaimTemplate{ObjectMeta: meta, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: spec}}
		t.SetGroupVersionKind(resourcev1.SchemeGroupVersion.WithKind(kind))
		return t
	}
	c := &resourcev1.ResourceClaim{ObjectMeta: meta, Spec: spec}
	c.SetGroupVersionKind(resourcev1.SchemeGroupVersion.WithKind(kind))
	return c
}

// claimRequest is the review the API server sends for obj (old on UPDATE).
func claimRequest(t *testing.T, op admissionv1.Operation, obj, old runtime.Object, user string) admission.Request {
	t.Helper()
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       types.UID("6f0b7a52-0c1e-4bd9-9d0e-2b7e7c1f3a10"),
		Kind:      metav1.GroupVersionKind{Group: resourcev1.GroupName, Version: "v1", Kind: kind},
		Resource:  metav1.GroupVersionResource{Group: resourcev1.GroupName, Version: "v1", Resource: strings.ToLower(kind) + "s"},
		Namespace: nsPlain,
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: user},
		Object:    runtime.RawExtension{Raw: toJSON(t, obj)},
	}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: toJSON(t, old)}
	}
	return req
}

// maxGPUs is the library's max-gpus-per-pod at a limit of 4, for the kinds.
func maxGPUs(t *testing.T, kinds ...string) policies.Policy {
	t.Helper()
	rego, err := library.FS.ReadFile("max-gpus-per-pod.rego")
	if err != nil {
		t.Fatal(err)
	}
	return policies.Policy{Name: "max-gpus-per-pod", Module: string(rego), Parameters: map[string]any{"max": 4}, Match: policies.Match{Kinds: kinds}}
}

var claimKinds = []string{"ResourceClaim", "ResourceClaimTemplate"}

// Issue 42, item 5: a ResourceClaim or ResourceClaimTemplate is judged at
// its own admission by the policies that name its kind, by what it asks
// for: more GPUs than a pod may hold, or every GPU of a node, is denied
// with the policy's message, as a Pod naming it would be.
func TestValidatingClaims(t *testing.T) {
	h := validating(t, maxGPUs(t, "Pod", "ResourceClaim", "ResourceClaimTemplate"))
	for _, kind := range claimKinds {
		cases := map[string]struct {
			obj         runtime.Object
			user        string
			wantAllowed bool
			wantMessage string
		}{
			"within the limit": {obj: claimOf(kind, "small", gpuRequest("", 4)), user: alice, wantAllowed: true},
			"more GPUs than a pod may hold": {
				obj: claimOf(kind, "big", gpuRequest("", 16)), user: alice,
				wantMessage: `[max-gpus-per-pod] ` + kind + ` "big" asks for 16 GPUs (request "gpu"); at most 4 are allowed per pod in namespace "team-a"`,
			},
			"every GPU of a node": {
				obj: claimOf(kind, "whole", gpuRequest(resourcev1.DeviceAllocationModeAll, 0)), user: alice,
				wantMessage: `[max-gpus-per-pod] ` + kind + ` "whole" asks for every GPU of a node (request "gpu": allocationMode All of device class "gpu.nvidia.com"); ask for an exact count, at most 4 per pod`,
			},
		}
		for name, tc := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				resp := h.Handle(context.Background(), claimRequest(t, admissionv1.Create, tc.obj, nil, tc.user))
				if resp.Allowed != tc.wantAllowed {
					t.Fatalf("allowed %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
				}
				if !tc.wantAllowed {
					if resp.Result.Code != http.StatusForbidden || resp.Result.Message != tc.wantMessage {
						t.Errorf("answer %d %q, want 403 %q", resp.Result.Code, resp.Result.Message, tc.wantMessage)
					}
				}
			})
		}
		if got := testutil.ToFloat64(h.metrics.reviews.WithLabelValues(kind, "CREATE", outcomeDenied)); got != 2 {
			t.Errorf("reviews{kind=%s, outcome=denied} = %v, want 2", kind, got)
		}
	}

	t.Run("a policy whose match names no claim kind does not judge claims", func(t *testing.T) {
		workloads := validating(t, maxGPUs(t))
		for _, kind := range claimKinds {
			if resp := workloads.Handle(context.Background(), claimRequest(t, admissionv1.Create, claimOf(kind, "big", gpuRequest("", 16)), nil, alice)); !resp.Allowed {
				t.Errorf("%s: denied (%v), want allowed: an empty match.kinds means the workload kinds", kind, resp.Result.Message)
			}
		}
	})

	t.Run("excluded and ignored namespaces are left alone", func(t *testing.T) {
		for _, ns := range []string{"kube-system", nsIgnored} {
			c := claimOf("ResourceClaim", "big", gpuRequest("", 16)).(*resourcev1.ResourceClaim)
			c.Namespace = ns
			req := claimRequest(t, admissionv1.Create, c, nil, alice)
			req.Namespace = ns
			if resp := h.Handle(context.Background(), req); !resp.Allowed {
				t.Errorf("namespace %s: denied (%v), want allowed unjudged", ns, resp.Result.Message)
			}
		}
	})

	t.Run("a claim that does not decode is a bad request", func(t *testing.T) {
		req := claimRequest(t, admissionv1.Create, claimOf("ResourceClaim", "big"), nil, alice)
		req.Object.Raw = []byte(`{"spec":{"devices":{"requests":"many"}}}`)
		if resp := h.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			t.Errorf("%v %+v, want 400", resp.Allowed, resp.Result)
		}
	})

	t.Run("an exception for the claim lifts the denial", func(t *testing.T) {
		hx := validating(t, maxGPUs(t, "ResourceClaim"))
		expires := time.Now().Add(time.Hour).Truncate(time.Second)
		hx.checker.Engine.SetExceptions(policies.NewExceptions(time.Minute, &policies.Exception{Namespace: nsPlain, Name: "bench",
			Policies: []string{"max-gpus-per-pod"}, Kinds: []string{"ResourceClaim"}, Names: []string{"big"}, ExpiresAt: expires}))
		resp := hx.Handle(context.Background(), claimRequest(t, admissionv1.Create, claimOf("ResourceClaim", "big", gpuRequest("", 16)), nil, alice))
		if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "allowed by exception "+nsPlain+"/bench") {
			t.Errorf("%v %v, want allowed with the exception's warning", resp.Allowed, resp.Warnings)
		}
		if resp := hx.Handle(context.Background(), claimRequest(t, admissionv1.Create, claimOf("ResourceClaim", "other", gpuRequest("", 16)), nil, alice)); resp.Allowed {
			t.Error("a claim the exception does not name: allowed, want denied")
		}
	})
}

// Issue 42, item 5: an UPDATE of a claim is ratcheted as a workload's is;
// the copies Kubernetes and modelgate make of what was judged are not
// judged again, and what anyone else writes is, whatever it says of
// itself.
func TestValidatingClaimUpdatesAndCopies(t *testing.T) {
	h := validating(t, maxGPUs(t, "ResourceClaim", "ResourceClaimTemplate"))
	big := claimOf("ResourceClaim", "big", gpuRequest("", 16)).(*resourcev1.ResourceClaim)
	labelled := big.DeepCopy()
	labelled.Labels = map[string]string{"team": "nlp"}
	resp := h.Handle(context.Background(), claimRequest(t, admissionv1.Update, labelled, big, alice))
	want := []string{`[max-gpus-per-pod] existing violation, not introduced by this update: ResourceClaim "big" asks for 16 GPUs (request "gpu"); at most 4 are allowed per pod in namespace "team-a"`}
	if !resp.Allowed {
		t.Fatalf("a label added to a claim that had 16 GPUs: denied (%v), want ratcheted", resp.Result.Message)
	}
	if diff := cmp.Diff(want, resp.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.metrics.reviews.WithLabelValues("ResourceClaim", "UPDATE", outcomeRatcheted)); got != 1 {
		t.Errorf("reviews{outcome=ratcheted} = %v, want 1", got)
	}

	podOwned := func(c *resourcev1.ResourceClaim) *resourcev1.ResourceClaim {
		c = c.DeepCopy()
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "server", UID: "u", Controller: ptr.To(true)}}
		return c
	}
	ours := claimOf("ResourceClaimTemplate", gpuclaim.TemplatePrefix+"16-0123456789", gpuRequest("", 16)).(*resourcev1.ResourceClaimTemplate)
	ours.Labels = map[string]string{gpuclaim.ManagedByLabel: gpuclaim.ManagedBy}
	cases := map[string]struct {
		req         admission.Request
		wantAllowed bool
	}{
		"the resource claim controller's claim for a Pod":   {req: claimRequest(t, admissionv1.Create, podOwned(big), nil, claimCtrl), wantAllowed: true},
		"a user's claim naming a Pod as its controller":     {req: claimRequest(t, admissionv1.Create, podOwned(big), nil, alice)},
		"the resource claim controller's claim with no Pod": {req: claimRequest(t, admissionv1.Create, big, nil, claimCtrl)},
		"modelgate's template":                              {req: claimRequest(t, admissionv1.Create, ours, nil, modelgate), wantAllowed: true},
		"a user's template labelled as modelgate's":         {req: claimRequest(t, admissionv1.Create, ours, nil, alice)},
		"a finalizer added": {req: func() admission.Request {
			cur := big.DeepCopy()
			cur.Finalizers = []string{"resource.kubernetes.io/delete-protection"}
			return claimRequest(t, admissionv1.Update, cur, big, "system:kube-scheduler")
		}(), wantAllowed: true},
		"being deleted": {req: func() admission.Request {
			cur := labelled.DeepCopy()
			cur.DeletionTimestamp = ptr.To(metav1.Now())
			return claimRequest(t, admissionv1.Update, cur, big, alice)
		}(), wantAllowed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), tc.req)
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("allowed %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantAllowed && len(resp.Warnings) > 0 {
				t.Errorf("warnings %v: want none, unjudged", resp.Warnings)
			}
		})
	}
}

// unjudgedClaim decides alone which reviews of claims reach the policies.
func TestUnjudgedClaim(t *testing.T) {
	claim := func(edit func(*claimObject)) *claimObject {
		c := &claimObject{meta: &metav1.ObjectMeta{Name: "c", Labels: map[string]string{"app": "x"}},
			spec: &resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{gpuRequest("", 2)}}}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	podOwner := func(c *claimObject) {
		c.meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", Controller: ptr.To(true)}}
	}
	managed := func(c *claimObject) { c.meta.Labels = map[string]string{gpuclaim.ManagedByLabel: gpuclaim.ManagedBy} }
	cases := map[string]struct {
		r      claimReview
		judged bool
	}{
		"a user's claim":                  {r: claimReview{kind: "ResourceClaim", op: admissionv1.Create, cur: claim(nil)}, judged: true},
		"a user's claim owned by a Pod":   {r: claimReview{kind: "ResourceClaim", op: admissionv1.Create, cur: claim(podOwner)}, judged: true},
		"a copier's claim owned by a Pod": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Create, cur: claim(podOwner), copier: true}},
		"a copier's claim owned by a Pod that is not its controller": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Create, copier: true,
			cur: claim(func(c *claimObject) { podOwner(c); c.meta.OwnerReferences[0].Controller = nil })}, judged: true},
		"a copier's claim owned by something else": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Create, copier: true,
			cur: claim(func(c *claimObject) { podOwner(c); c.meta.OwnerReferences[0].Kind = "Job" })}, judged: true},
		"a copier's template":                             {r: claimReview{kind: "ResourceClaimTemplate", op: admissionv1.Create, cur: claim(podOwner), copier: true}, judged: true},
		"modelgate's own template":                        {r: claimReview{kind: "ResourceClaimTemplate", op: admissionv1.Create, cur: claim(managed), self: true}},
		"modelgate writing a template not its own":        {r: claimReview{kind: "ResourceClaimTemplate", op: admissionv1.Create, cur: claim(nil), self: true}, judged: true},
		"modelgate writing a claim":                       {r: claimReview{kind: "ResourceClaim", op: admissionv1.Create, cur: claim(managed), self: true}, judged: true},
		"someone else's template labelled as modelgate's": {r: claimReview{kind: "ResourceClaimTemplate", op: admissionv1.Create, cur: claim(managed)}, judged: true},
		"an update of the labels": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Update, old: claim(nil),
			cur: claim(func(c *claimObject) { c.meta.Labels["tier"] = "gold" })}, judged: true},
		"an update of the annotations": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Update, old: claim(nil),
			cur: claim(func(c *claimObject) { c.meta.Annotations = map[string]string{"a": "b"} })}, judged: true},
		"an update of the spec (which the API server refuses)": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Update, old: claim(nil),
			cur: claim(func(c *claimObject) { c.spec.Devices.Requests[0].Exactly.Count = 16 })}, judged: true},
		"an update with an old object that did not decode": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Update, cur: claim(nil)}, judged: true},
		"an update of the finalizers": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Update, old: claim(nil),
			cur: claim(func(c *claimObject) { c.meta.Finalizers = []string{"f"} })}},
		"an update of a claim being deleted": {r: claimReview{kind: "ResourceClaim", op: admissionv1.Update, old: claim(nil),
			cur: claim(func(c *claimObject) { c.meta.DeletionTimestamp = ptr.To(metav1.Now()); c.meta.Labels["x"] = "y" })}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if why := unjudgedClaim(tc.r); (why == "") != tc.judged {
				t.Errorf("unjudgedClaim = %q, want judged %v", why, tc.judged)
			}
		})
	}
}

// datedClaims is the webhook's cache as the handler reads it: claims by
// name with their creation times.
type datedClaims map[string]*resourcev1.ResourceClaim

func (m datedClaims) ClaimSpec(ns string, pc corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, bool) {
	s, _, ok := m.DatedClaimSpec(ns, pc)
	return s, ok
}

func (m datedClaims) DatedClaimSpec(ns string, pc corev1.PodResourceClaim) (*resourcev1.ResourceClaimSpec, time.Time, bool) {
	if ns != nsPlain || pc.ResourceClaimName == nil || m[*pc.ResourceClaimName] == nil {
		return nil, time.Time{}, false
	}
	c := m[*pc.ResourceClaimName]
	return &c.Spec, c.CreationTimestamp.Time, true
}

// Issue 42, item 5: a Pod that names resource claims is judged on every
// UPDATE the API server sends, the one removing its scheduling gate
// included, against the claims as they are now; ratcheting lifts only the
// violations of claims the Pod was admitted with, never those of a claim
// created since.
func TestValidatingPodClaimsJudgedAgain(t *testing.T) {
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	claimAt := func(n int64, at time.Time) *resourcev1.ResourceClaim {
		c := claimOf("ResourceClaim", "accel", gpuRequest("", n)).(*resourcev1.ResourceClaim)
		c.CreationTimestamp = metav1.NewTime(at)
		return c
	}
	gated := func(gate bool) *corev1.Pod {
		p := object("Pod", nsPlain, builders.Options{}).(*corev1.Pod)
		p.CreationTimestamp = metav1.NewTime(created)
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("accel")}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		if gate {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/queue"}}
		}
		return p
	}
	const recreated = `[max-gpus-per-pod] pod asks for 16 GPUs (container "server"); at most 4 are allowed per pod in namespace "team-a"`
	cases := map[string]struct {
		claim        *resourcev1.ResourceClaim
		wantAllowed  bool
		wantMessage  string
		wantWarnings []string
	}{
		"the claim the Pod was admitted with, within the limit":       {claim: claimAt(2, created.Add(-time.Minute)), wantAllowed: true},
		"the claim created again since, asking for more":              {claim: claimAt(16, created.Add(time.Minute)), wantMessage: recreated},
		"a claim created in the Pod's second counts as created since": {claim: claimAt(16, created), wantMessage: recreated},
		"a claim the Pod was admitted with before the limit: a kept violation": {claim: claimAt(16, created.Add(-time.Minute)), wantAllowed: true,
			wantWarnings: []string{`[max-gpus-per-pod] existing violation, not introduced by this update: pod asks for 16 GPUs (container "server"); at most 4 are allowed per pod in namespace "team-a"`}},
		"the claim deleted: unresolved, denied": {wantMessage: `[max-gpus-per-pod] pod uses resource claim "gpu", whose ResourceClaimTemplate or ResourceClaim was not found in namespace "team-a", so its GPUs cannot be counted; create it first, then retry`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := validating(t, maxGPUs(t, "Pod"))
			claims := datedClaims{}
			if tc.claim != nil {
				claims["accel"] = tc.claim
			}
			h.SetClaims(claims)
			// The scheduling gate removed: a change outside the view.
			resp := h.Handle(context.Background(), update(t, gated(true), gated(false), alice))
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if !tc.wantAllowed && resp.Result.Message != tc.wantMessage {
				t.Errorf("message %q, want %q", resp.Result.Message, tc.wantMessage)
			}
			if diff := cmp.Diff(tc.wantWarnings, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a Pod that names no claim: the gate's removal is not judged", func(t *testing.T) {
		h := validating(t, policies.Policy{Name: "no-gpus", Module: "package t\n\ndeny contains \"no GPU pods\" if input.workload.gpu.count > 0\n", NoRatchet: true})
		plain := func(gate bool) *corev1.Pod {
			p := gated(gate)
			p.Spec.ResourceClaims, p.Spec.Containers[0].Resources.Claims = nil, nil
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
			return p
		}
		if resp := h.Handle(context.Background(), update(t, plain(true), plain(false), alice)); !resp.Allowed {
			t.Errorf("denied (%v), want allowed unjudged", resp.Result.Message)
		}
		if resp := h.Handle(context.Background(), create(t, plain(false), alice)); resp.Allowed {
			t.Error("the policy does not deny the Pod on CREATE: the case above proves nothing")
		}
	})

	t.Run("a scheduled Pod: its claims are allocated, an update keeps what they hold", func(t *testing.T) {
		h := validating(t, maxGPUs(t, "Pod"))
		h.SetClaims(datedClaims{"accel": claimAt(16, created.Add(time.Minute))})
		running := func(edit func(*corev1.Pod)) *corev1.Pod {
			p := gated(false)
			p.Spec.NodeName = "gpu-node-0"
			if edit != nil {
				edit(p)
			}
			return p
		}
		tolerated := running(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		})
		if resp := h.Handle(context.Background(), update(t, running(nil), tolerated, alice)); !resp.Allowed || len(resp.Warnings) > 0 {
			t.Errorf("a toleration added: %v %v, want allowed unjudged", resp.Allowed, resp.Warnings)
		}
		labelled := running(func(p *corev1.Pod) { p.Labels = map[string]string{"rollouts.argoproj.io/revision": "2"} })
		resp := h.Handle(context.Background(), update(t, running(nil), labelled, alice))
		want := []string{`[max-gpus-per-pod] existing violation, not introduced by this update: pod asks for 16 GPUs (container "server"); at most 4 are allowed per pod in namespace "team-a"`}
		if !resp.Allowed {
			t.Fatalf("a label added: denied (%v), want ratcheted", resp.Result.Message)
		}
		if diff := cmp.Diff(want, resp.Warnings); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
	})

	t.Run("an update of a Pod being deleted is not judged", func(t *testing.T) {
		h := validating(t, maxGPUs(t, "Pod"))
		h.SetClaims(datedClaims{"accel": claimAt(16, created.Add(time.Minute))})
		cur := gated(false)
		cur.DeletionTimestamp = ptr.To(metav1.Now())
		if resp := h.Handle(context.Background(), update(t, gated(true), cur, alice)); !resp.Allowed {
			t.Errorf("denied (%v), want allowed unjudged", resp.Result.Message)
		}
	})
}
