package offline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// celExceptionCases are cases of max-gpus (celPolicies), whose Rego and
// CEL form agree, with an exception for the Pod bench until 2026-12-04
// 18:00 (less the default clock skew, a minute): each case passes only
// where the CEL form decides as the Rego does with the exception in force
// or not, and ratchets an UPDATE as it does.
const celExceptionCases = `apiVersion: test.modelgate.io/v1alpha1
kind: PolicyTest
policies: policies.yaml
exceptions: exceptions.yaml
namespace: team-a
namespaceLabels: {modelgate.io/injection: enabled}
now: "2026-12-01T09:00:00Z"
cases:
- name: the excepted Pod is admitted with a warning, by both forms
  object: {apiVersion: v1, kind: Pod, metadata: {name: bench}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "2"}}}]}}
  expect: {decision: warned}
- name: another Pod is denied by both
  object: {apiVersion: v1, kind: Pod, metadata: {name: other}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "2"}}}]}}
  expect: {decision: denied}
- name: once the exception has expired (the clock skew allowed) both deny
  now: "2026-12-04T17:59:00Z"
  object: {apiVersion: v1, kind: Pod, metadata: {name: bench}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "2"}}}]}}
  expect: {decision: denied}
- name: an UPDATE keeping an old violation is a warning in Rego, admitted by CEL
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 3, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "2"}}}]}}}}
  oldObject: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 1, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "2"}}}]}}}}
  expect: {decision: warned}
- name: an UPDATE introducing a violation is denied by both
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 1, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "2"}}}]}}}}
  oldObject: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {replicas: 1, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: "1"}}}]}}}}
  expect: {decision: denied}
`

const celException = `apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicyException
metadata: {name: bench}
spec:
  policies: [max-gpus]
  match: {kinds: [Pod], names: [bench]}
  expiresAt: "2026-12-04T18:00:00Z"
  reason: a benchmark
`

// TestCELFormsWithExceptionsAndRatcheting: modelgate test judges each
// case's object with the CEL forms as modelgate would generate them with
// the case's exceptions in force at the case's time, ratcheting UPDATEs:
// where the API server would agree with the Rego, the case passes.
func TestCELFormsWithExceptionsAndRatcheting(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"policies.yaml": celPolicies, "exceptions.yaml": celException, "t.cases.yaml": celExceptionCases,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Only max-gpus: the other two disagree with their Rego on purpose.
	policiesOnly := strings.Split(celPolicies, "---\n")[0]
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), []byte(policiesOnly), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadCaseFile(filepath.Join(dir, "t.cases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var r Runner
	results, err := r.Run(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		if res.Err != nil || !res.Passed {
			t.Errorf("case %q: error %v, outcome %s %q, CEL %+v, disagreements %q", res.Case.Name, res.Err,
				res.Outcome.Decision, res.Outcome.Messages(), res.Outcome.CEL, res.Outcome.Disagreements())
		}
		if res.Outcome.CEL == nil {
			t.Errorf("case %q: not judged by the CEL forms", res.Case.Name)
		}
	}
}

// TestExceptionObject: an exception in the engine's form, read back as the
// WorkloadPolicyException it was converted from, converts to the same
// exception again: the CEL forms see what the engine applies.
func TestExceptionObject(t *testing.T) {
	ex := &policyv1.WorkloadPolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "e"}}
	ex.Spec = policyv1.WorkloadPolicyExceptionSpec{
		Policies: []string{"max-gpus", "other"}, PolicySource: policyv1.PolicySourceDirectory,
		Match: policyv1.ExceptionMatch{Kinds: []string{"Pod"}, Names: []string{"a", `b"c`}, LabelSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"app": "bench", "tier": "gpu"},
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "zone", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"b", "a"}},
				{Key: "x", Operator: metav1.LabelSelectorOpExists},
				{Key: "y", Operator: metav1.LabelSelectorOpDoesNotExist},
				{Key: "w", Operator: metav1.LabelSelectorOpIn, Values: []string{"1", "2"}},
			}}},
		ExpiresAt: metav1.NewTime(time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)), Reason: "r", Ticket: "OPS-1",
	}
	for _, source := range []policyv1.PolicySource{policyv1.PolicySourceDirectory, policyv1.PolicySourceWorkloadPolicy, ""} {
		ex.Spec.PolicySource = source
		e, err := validators.ExceptionOf(ex)
		if err != nil {
			t.Fatal(err)
		}
		back, ok := exceptionObject(e)
		if !ok {
			t.Fatal("not converted back")
		}
		again, err := validators.ExceptionOf(&back)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(e, again, cmp.Comparer(func(a, b interface{ String() string }) bool { return a.String() == b.String() })); diff != "" {
			t.Errorf("source %q: converted back and again (-want +got):\n%s", source, diff)
		}
	}
	if got := exceptionsInForce(policies.NewExceptions(time.Minute, &policies.Exception{Name: "gone", ExpiresAt: time.Now().Add(30 * time.Second)})); len(got) != 0 {
		t.Errorf("an exception within the clock skew of its expiry is in force: %v", got)
	}
}
