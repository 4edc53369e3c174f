package validators

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
)

var validateNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func exceptionFor(f func(*policyv1.WorkloadPolicyException)) *policyv1.WorkloadPolicyException {
	ex := &policyv1.WorkloadPolicyException{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "bench"},
		Spec: policyv1.WorkloadPolicyExceptionSpec{
			Policies:  []string{"max-gpus-per-pod"},
			ExpiresAt: metav1.NewTime(validateNow.Add(7 * 24 * time.Hour)),
			Reason:    "benchmark run on 8 GPUs",
			Ticket:    "OPS-123",
		},
	}
	if f != nil {
		f(ex)
	}
	return ex
}

func TestValidateException(t *testing.T) {
	policiesInForce := map[string]*policyv1.WorkloadMatch{
		"max-gpus-per-pod": {},
		"pods-only":        {Kinds: []string{"Pod"}},
		"team-b-only":      {Namespaces: []string{"team-b"}},
	}
	// The policy directory holds from-directory, and a max-gpus-per-pod of
	// its own.
	directory := map[string]bool{"from-directory": true, "max-gpus-per-pod": true}
	rules := ExceptionRules{
		Now:         validateNow,
		MaxDuration: 90 * 24 * time.Hour,
		ClockSkew:   time.Minute,
		PolicyExists: func(source, n string) bool {
			switch source {
			case SourceWorkloadPolicy:
				return policiesInForce[n] != nil
			case policies.SourceDirectory:
				return directory[n]
			}
			return false
		},
		Policy: func(n string) *policyv1.WorkloadMatch { return policiesInForce[n] },
	}
	cases := map[string]struct {
		ex, old      *policyv1.WorkloadPolicyException
		wantErrs     []string // "field: detail" substrings, in order
		wantWarnings []string // substrings
	}{
		"valid": {ex: exceptionFor(nil)},
		"unknown policy": {
			ex:       exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.Policies = []string{"max-gpus-per-pod", "nope"} }),
			wantErrs: []string{`spec.policies[1]: Not found: "nope"`},
		},
		"wildcard": {
			ex:       exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.Policies = []string{"max-*"} }),
			wantErrs: []string{`spec.policies[0]: Invalid value: "max-*": must name a policy exactly: there is no wildcard`},
		},
		// Issue 42, item 6: a policy is its source and its name.
		"a directory policy, without policySource": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.Policies = []string{"from-directory"} }),
			wantErrs: []string{`spec.policies[0]: Invalid value: "from-directory": no WorkloadPolicy of this name is in force, only a policy of the policy directory: ` +
				"set spec.policySource: Directory to lift the directory policy's denials"},
		},
		"a directory policy, with policySource Directory": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.Policies, e.Spec.PolicySource = []string{"from-directory", "max-gpus-per-pod"}, policyv1.PolicySourceDirectory
			}),
		},
		"a WorkloadPolicy, with policySource Directory": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.Policies, e.Spec.PolicySource = []string{"pods-only", "nope"}, policyv1.PolicySourceDirectory
			}),
			wantErrs: []string{
				`spec.policies[0]: Invalid value: "pods-only": no policy of the policy directory (spec.policySource: Directory) has this name, only a WorkloadPolicy: ` +
					"leave spec.policySource unset to lift the WorkloadPolicy's denials",
				`spec.policies[1]: Not found: "nope"`,
			},
		},
		"a source the API does not know": {
			ex:       exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.PolicySource = "ConfigMap" }),
			wantErrs: []string{`spec.policySource: Unsupported value: "ConfigMap": supported values: "WorkloadPolicy", "Directory"`},
		},
		"no policies": {
			ex:       exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.Policies = nil }),
			wantErrs: []string{"spec.policies: Required value"},
		},
		"blank reason": {
			ex:       exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.Reason = "  " }),
			wantErrs: []string{"spec.reason: Required value: say why"},
		},
		"no expiry": {
			ex:       exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.ExpiresAt = metav1.Time{} }),
			wantErrs: []string{"spec.expiresAt: Required value: an exception must expire"},
		},
		"in the past": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(-time.Second))
			}),
			wantErrs: []string{`spec.expiresAt: Invalid value: "2026-11-28T11:59:59Z": must be more than 1m0s (policy.exceptions.clockSkew) in the future (now is 2026-11-28T12:00:00Z)`},
		},
		// Issue 42, item 6: an exception stops applying clockSkew before
		// its expiresAt, so one that expires sooner never applies.
		"within the clock skew": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(30 * time.Second))
			}),
			wantErrs: []string{`spec.expiresAt: Invalid value: "2026-11-28T12:00:30Z": must be more than 1m0s (policy.exceptions.clockSkew) in the future (now is 2026-11-28T12:00:00Z)`},
		},
		"exactly the clock skew ahead": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(time.Minute))
			}),
			wantErrs: []string{`spec.expiresAt: Invalid value: "2026-11-28T12:01:00Z": must be more than 1m0s (policy.exceptions.clockSkew)`},
		},
		"just beyond the clock skew": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(time.Minute + time.Second))
			}),
		},
		"an update that keeps an expiry within the clock skew": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(30 * time.Second))
				e.Spec.Reason = "edited"
			}),
			old: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(30 * time.Second))
			}),
		},
		"too far ahead": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(91 * 24 * time.Hour))
			}),
			wantErrs: []string{`spec.expiresAt: Invalid value: "2027-02-27T12:00:00Z": must be at most 90 days ahead (policy.exceptions.maxDuration), that is no later than 2027-02-26T12:00:00Z`},
		},
		"an update that keeps an expiry now too far": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(91 * 24 * time.Hour))
				e.Spec.Reason = "edited"
			}),
			old: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(91 * 24 * time.Hour))
			}),
		},
		"bad selector": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.Match.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
			}),
			wantErrs: []string{"spec.match.labelSelector: Invalid value"},
		},
		"kinds the policy never judges": {
			ex: exceptionFor(func(e *policyv1.WorkloadPolicyException) {
				e.Spec.Policies = []string{"pods-only"}
				e.Spec.Match.Kinds = []string{"Deployment"}
			}),
			wantWarnings: []string{"spec.match.kinds [Deployment]: WorkloadPolicy pods-only applies only to [Pod]"},
		},
		"a namespace the policy never judges": {
			ex:           exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.Policies = []string{"team-b-only"} }),
			wantWarnings: []string{"WorkloadPolicy team-b-only does not apply in namespace team-a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs, warnings := ValidateException(tc.ex, tc.old, rules)
			if len(errs) != len(tc.wantErrs) {
				t.Fatalf("errors %v, want %d: %q", errs, len(tc.wantErrs), tc.wantErrs)
			}
			for i, want := range tc.wantErrs {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d: %q, want it to contain %q", i, errs[i].Error(), want)
				}
			}
			if len(warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %q", warnings, tc.wantWarnings)
			}
			for i, want := range tc.wantWarnings {
				if !strings.Contains(warnings[i], want) {
					t.Errorf("warning %d: %q, want it to contain %q", i, warnings[i], want)
				}
			}
		})
	}
}

// Without clock skew, expiresAt need only be in the future.
func TestValidateExceptionNoClockSkew(t *testing.T) {
	rules := ExceptionRules{Now: validateNow}
	soon := exceptionFor(func(e *policyv1.WorkloadPolicyException) {
		e.Spec.ExpiresAt = metav1.NewTime(validateNow.Add(time.Second))
	})
	if errs, _ := ValidateException(soon, nil, rules); len(errs) > 0 {
		t.Errorf("a second ahead: %v, want accepted", errs)
	}
	now := exceptionFor(func(e *policyv1.WorkloadPolicyException) { e.Spec.ExpiresAt = metav1.NewTime(validateNow) })
	errs, _ := ValidateException(now, nil, rules)
	want := `spec.expiresAt: Invalid value: "2026-11-28T12:00:00Z": must be in the future (now is 2026-11-28T12:00:00Z)`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("expiresAt now: %v, want %q", errs, want)
	}
}

func TestSubjectOf(t *testing.T) {
	owned := func(kind, name string, lbls map[string]string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: "x", Labels: lbls, OwnerReferences: []metav1.OwnerReference{
			{Kind: "Node", Name: "not-the-controller"},
			{Kind: kind, Name: name, Controller: ptr.To(true)},
		}}
	}
	cases := map[string]struct {
		kind string
		obj  *metav1.ObjectMeta
		want []policies.Identity
	}{
		"a Deployment's Pod": {kind: "Pod", obj: owned("ReplicaSet", "gpu8-7d9f", map[string]string{"pod-template-hash": "7d9f"}),
			want: []policies.Identity{{Kind: "Pod", Name: "x"}, {Kind: "Deployment", Name: "gpu8"}}},
		"a bare ReplicaSet's Pod": {kind: "Pod", obj: owned("ReplicaSet", "rs", nil),
			want: []policies.Identity{{Kind: "Pod", Name: "x"}}},
		"a StatefulSet's Pod": {kind: "Pod", obj: owned("StatefulSet", "db", nil),
			want: []policies.Identity{{Kind: "Pod", Name: "x"}, {Kind: "StatefulSet", Name: "db"}}},
		"a CronJob's Job's Pod": {kind: "Pod", obj: owned("Job", "nightly-29412345", nil),
			want: []policies.Identity{{Kind: "Pod", Name: "x"}, {Kind: "Job", Name: "nightly-29412345"}, {Kind: "CronJob", Name: "nightly"}}},
		"a Job's Pod": {kind: "Pod", obj: owned("Job", "train-2", nil),
			want: []policies.Identity{{Kind: "Pod", Name: "x"}, {Kind: "Job", Name: "train-2"}}},
		"a CronJob's Job": {kind: "Job", obj: owned("CronJob", "nightly", nil),
			want: []policies.Identity{{Kind: "Job", Name: "x"}, {Kind: "CronJob", Name: "nightly"}}},
		"no controller": {kind: "Deployment", obj: &metav1.ObjectMeta{Name: "x"},
			want: []policies.Identity{{Kind: "Deployment", Name: "x"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tmpl := &metav1.ObjectMeta{Labels: map[string]string{"app": "t"}}
			s := SubjectOf(tc.kind, "ns", tc.obj, tmpl)
			if diff := cmp.Diff(tc.want, s.Identities); diff != "" {
				t.Errorf("identities (-want +got):\n%s", diff)
			}
			if len(s.Labels) != 2 || s.Labels[1]["app"] != "t" {
				t.Errorf("labels %v: want the object's, then the template's", s.Labels)
			}
		})
	}
}
