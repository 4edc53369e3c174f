package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/validators"
)

// A denial an exception in force covers is allowed with a warning naming
// it, counted as excepted; a Deployment's Pod is covered by an exception
// for the Deployment (through its ReplicaSet's owner reference, which the
// view decodes); once expired, or for another workload, it denies again.
func TestValidatingException(t *testing.T) {
	const maxGPUs = "package t\n\ndeny contains sprintf(\"%d GPUs, more than 4\", [input.workload.gpu.count]) if input.workload.gpu.count > 4\n"
	h := validating(t, policies.Policy{Name: "max-gpus", Module: maxGPUs})
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	ex := &policies.Exception{Namespace: nsPlain, Name: "bench", Policies: []string{"max-gpus"},
		Kinds: []string{"Deployment"}, Names: []string{"gpu8"}, ExpiresAt: expires, Ticket: "OPS-123"}
	h.checker.Engine.SetExceptions(policies.NewExceptions(time.Minute, ex))

	pod := func(owner string) *corev1.Pod {
		p := object("Pod", nsPlain, builders.Options{}).(*corev1.Pod)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		p.Labels = map[string]string{"pod-template-hash": "5d8f7c"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner + "-5d8f7c", UID: "u", Controller: ptr.To(true)}}
		return p
	}
	resp := h.Handle(context.Background(), create(t, pod("gpu8"), alice))
	if !resp.Allowed {
		t.Fatalf("the Deployment gpu8's Pod: denied (%v), want allowed by the exception", resp.Result.Message)
	}
	want := []string{"[max-gpus] allowed by exception " + nsPlain + "/bench (ticket OPS-123) until " + expires.UTC().Format(time.RFC3339) + ": 8 GPUs, more than 4"}
	if diff := cmp.Diff(want, resp.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.metrics.reviews.WithLabelValues("Pod", "CREATE", outcomeExcepted)); got != 1 {
		t.Errorf("reviews{outcome=excepted} = %v, want 1", got)
	}

	if resp := h.Handle(context.Background(), create(t, pod("gpu4"), alice)); resp.Allowed {
		t.Error("the Deployment gpu4's Pod: allowed, want denied (the exception names gpu8)")
	}

	// Within the clock skew of expiring: no longer applies.
	h.checker.Engine.SetExceptions(policies.NewExceptions(time.Minute, ex).WithClock(func() time.Time { return expires.Add(-59 * time.Second) }))
	if resp := h.Handle(context.Background(), create(t, pod("gpu8"), alice)); resp.Allowed || !strings.Contains(resp.Result.Message, "[max-gpus] 8 GPUs, more than 4") {
		t.Errorf("59s before expiresAt with 1m of skew allowed: %v, want denied", resp.Allowed)
	}
}

// Issue 42, item 6: an exception lifts the denials of the policies of the
// source it names, never those of a policy of the same name from another:
// a WorkloadPolicyException names WorkloadPolicies unless its
// spec.policySource says Directory.
func TestValidatingExceptionSource(t *testing.T) {
	const (
		fromResource  = "package t\n\ndeny contains \"the WorkloadPolicy denies\" if input.workload.kind == \"Pod\"\n"
		fromDirectory = "package t\n\ndeny contains \"the directory policy denies\" if input.workload.kind == \"Pod\"\n"
	)
	h := validating(t,
		policies.Policy{Name: "max-gpus", Source: validators.SourceWorkloadPolicy, Module: fromResource},
		policies.Policy{Name: "max-gpus", Source: policies.SourceDirectory, Module: fromDirectory})
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	cases := map[string]struct {
		source                 policyv1.PolicySource
		wantLifted, wantDenied string
	}{
		"unset: the WorkloadPolicy's": {wantLifted: "the WorkloadPolicy denies", wantDenied: "[max-gpus] the directory policy denies"},
		"WorkloadPolicy":              {source: policyv1.PolicySourceWorkloadPolicy, wantLifted: "the WorkloadPolicy denies", wantDenied: "[max-gpus] the directory policy denies"},
		"Directory: the directory's":  {source: policyv1.PolicySourceDirectory, wantLifted: "the directory policy denies", wantDenied: "[max-gpus] the WorkloadPolicy denies"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ex, err := validators.ExceptionOf(&policyv1.WorkloadPolicyException{
				ObjectMeta: metav1.ObjectMeta{Namespace: nsPlain, Name: "bench"},
				Spec: policyv1.WorkloadPolicyExceptionSpec{Policies: []string{"max-gpus"}, PolicySource: tc.source,
					ExpiresAt: metav1.NewTime(expires), Reason: "benchmark"},
			})
			if err != nil {
				t.Fatal(err)
			}
			h.checker.Engine.SetExceptions(policies.NewExceptions(time.Minute, ex))
			resp := h.Handle(context.Background(), create(t, object("Pod", nsPlain, builders.Options{}), alice))
			if resp.Allowed {
				t.Fatalf("allowed with warnings %q: want denied by the policy of the other source", resp.Warnings)
			}
			if got := resp.Result.Message; !strings.Contains(got, tc.wantDenied) || strings.Contains(got, tc.wantLifted) {
				t.Errorf("denial %q: want %q and not %q", got, tc.wantDenied, tc.wantLifted)
			}
			want := []string{"[max-gpus] allowed by exception " + nsPlain + "/bench until " + expires.UTC().Format(time.RFC3339) + ": " + tc.wantLifted}
			if diff := cmp.Diff(want, resp.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// Issue 42, item 6: the exception webhook holds expiresAt to the
// Configuration's clockSkew it was given, not the default.
func TestExceptionValidatorClockSkew(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	e := policies.NewEngine(policies.Options{})
	c, err := policies.Compile(context.Background(), policies.Policy{Name: "max-gpus", Source: validators.SourceWorkloadPolicy, Module: "package t\n\ndeny contains \"no\" if false\n"})
	if err != nil {
		t.Fatal(err)
	}
	e.Swap(policies.NewSet(c))
	v := &ExceptionValidator{Engine: e, Config: config.Exceptions{ClockSkew: &metav1.Duration{Duration: 5 * time.Minute}},
		Now: func() time.Time { return now }}
	ex := func(ahead time.Duration) *policyv1.WorkloadPolicyException {
		return &policyv1.WorkloadPolicyException{
			TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.GroupVersion.String(), Kind: "WorkloadPolicyException"},
			ObjectMeta: metav1.ObjectMeta{Namespace: nsPlain, Name: "bench"},
			Spec: policyv1.WorkloadPolicyExceptionSpec{Policies: []string{"max-gpus"},
				ExpiresAt: metav1.NewTime(now.Add(ahead)), Reason: "benchmark"},
		}
	}
	resp := v.Handle(context.Background(), create(t, ex(2*time.Minute), alice))
	want := `spec.expiresAt: Invalid value: "2026-11-28T12:02:00Z": must be more than 5m0s (policy.exceptions.clockSkew) in the future (now is 2026-11-28T12:00:00Z)`
	if resp.Allowed || !strings.Contains(resp.Result.Message, want) {
		t.Errorf("2 minutes ahead with 5m of skew: allowed %v, %q; want refused with %q", resp.Allowed, resp.Result.Message, want)
	}
	if resp := v.Handle(context.Background(), create(t, ex(6*time.Minute), alice)); !resp.Allowed {
		t.Errorf("6 minutes ahead with 5m of skew: refused: %v", resp.Result.Message)
	}
}

// The exception metrics are computed at each scrape: an exception leaves
// them the moment it expires.
func TestExceptionCollector(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	e := policies.NewEngine(policies.Options{})
	e.SetExceptions(policies.NewExceptions(0,
		&policies.Exception{Namespace: "team-a", Name: "bench", ExpiresAt: now.Add(time.Hour), Ticket: "OPS-1"},
		&policies.Exception{Namespace: "team-a", Name: "old", ExpiresAt: now},
		&policies.Exception{Namespace: "team-b", Name: "train", ExpiresAt: now.Add(2 * time.Hour)},
	))
	c := &exceptionCollector{engine: e, now: func() time.Time { return now }}
	want := `
# HELP modelgate_policy_exception_expiry_timestamp_seconds When each WorkloadPolicyException in force expires (its spec.expiresAt), as seconds since the epoch.
# TYPE modelgate_policy_exception_expiry_timestamp_seconds gauge
modelgate_policy_exception_expiry_timestamp_seconds{exception_namespace="team-a",name="bench",ticket="OPS-1"} 1.7958708e+09
modelgate_policy_exception_expiry_timestamp_seconds{exception_namespace="team-b",name="train",ticket=""} 1.7958744e+09
# HELP modelgate_policy_exceptions_in_force WorkloadPolicyExceptions in force now (not expired), by their namespace.
# TYPE modelgate_policy_exceptions_in_force gauge
modelgate_policy_exceptions_in_force{exception_namespace="team-a"} 1
modelgate_policy_exceptions_in_force{exception_namespace="team-b"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
