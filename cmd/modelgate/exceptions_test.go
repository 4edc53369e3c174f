package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exceptionYAML is a WorkloadPolicyException of team-a for the Job
// pretrain and max-gpus-per-pod, expiring at expires.
func exceptionYAML(expires time.Time) string {
	return fmt.Sprintf(`apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicyException
metadata: {name: pretrain-16-gpus, namespace: team-a}
spec:
  policies: [max-gpus-per-pod]
  match: {kinds: [Job], names: [pretrain]}
  expiresAt: %q
  reason: pretraining run
  ticket: OPS-123
`, expires.UTC().Format(time.RFC3339))
}

const pretrainJob = `apiVersion: batch/v1
kind: Job
metadata: {name: pretrain, namespace: team-a}
spec:
  template:
    metadata:
      annotations:
        modelgate.io/inject: "true"
        modelgate.io/model: s3://acme-ml-models/llama-3.1-70b
        modelgate.io/gpu: "16"
        modelgate.io/gpu-product: NVIDIA-H100-80GB-HBM3
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: registry.acme.internal/trainer:v3
`

// Without --policies, a manifest that carries an exception is rendered
// as before: the exception is passed through and lifts nothing; one that
// names a policy not loaded is refused only when policies are given.
func TestExceptionsWithoutPolicies(t *testing.T) {
	dir := t.TempDir()
	ex := filepath.Join(dir, "exception.yaml")
	if err := os.WriteFile(ex, []byte(exceptionYAML(time.Now().Add(time.Hour))), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "", "render", "-f", ex)
	if code != 0 || !strings.Contains(out, "kind: WorkloadPolicyException") {
		t.Errorf("render of an exception alone: exit %d, stdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	dirPolicies := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(dirPolicies, []byte(`apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata: {name: other}
spec:
  rego: |
    package t
    deny contains "no" if false
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "", "render", "--policies", dirPolicies, "-f", ex)
	if code != 2 || !strings.Contains(stderr, `spec.policies[0]: Not found: "max-gpus-per-pod"`) {
		t.Errorf("an exception naming a policy not loaded: exit %d, stderr:\n%s", code, stderr)
	}
}

// render and audit take the WorkloadPolicyExceptions among the manifests
// and honour them as the cluster does: a covered denial is a warning
// (render) or a skip result naming the exception (audit) while it is in
// force, and a denial or failure again once it has expired.
func TestExceptionsOffline(t *testing.T) {
	policies := "../../config/samples/policies"
	for name, tc := range map[string]struct {
		expires    time.Time
		renderCode int
		auditWant  string
	}{
		"in force": {expires: time.Now().Add(time.Hour), renderCode: 0, auditWant: "skip"},
		"expired":  {expires: time.Now().Add(-time.Hour), renderCode: 1, auditWant: "fail"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ex := filepath.Join(dir, "exception.yaml")
			if err := os.WriteFile(ex, []byte(exceptionYAML(tc.expires)), 0o600); err != nil {
				t.Fatal(err)
			}
			job := filepath.Join(dir, "job.yaml")
			if err := os.WriteFile(job, []byte(pretrainJob), 0o600); err != nil {
				t.Fatal(err)
			}
			rendered, stderr, code := runCLI(t, "", "render", "--policies", policies, "--user", "alice@example.com",
				"--namespace-labels", "modelgate.io/team=nlp", "-f", job, "-f", ex)
			if code != tc.renderCode {
				t.Fatalf("render: exit status %d, want %d; stderr:\n%s", code, tc.renderCode, stderr)
			}
			line := "[max-gpus-per-pod] allowed by exception team-a/pretrain-16-gpus (ticket OPS-123) until " + tc.expires.UTC().Format(time.RFC3339)
			if got := strings.Contains(stderr, line); got != (tc.auditWant == "skip") {
				t.Errorf("render: the warning %q shown: %v; stderr:\n%s", line, got, stderr)
			}
			if !strings.Contains(rendered, "kind: WorkloadPolicyException") && code == 0 {
				t.Errorf("render dropped the exception:\n%s", rendered)
			}

			// The audit judges objects as stored: the Job as render
			// injected it (under an exception in force), with the
			// exception of the case.
			inForce := filepath.Join(dir, "in-force.yaml")
			if err := os.WriteFile(inForce, []byte(exceptionYAML(time.Now().Add(time.Hour))), 0o600); err != nil {
				t.Fatal(err)
			}
			injected, stderr, code := runCLI(t, "", "render", "--policies", policies, "--user", "alice@example.com",
				"--namespace-labels", "modelgate.io/team=nlp", "-f", job, "-f", inForce)
			if code != 0 {
				t.Fatalf("render under an exception in force: exit status %d; stderr:\n%s", code, stderr)
			}
			injectedJob, _, _ := strings.Cut(injected, "---\n")
			stdout, stderr, _ := runCLI(t, injectedJob, "audit", "--policies", policies, "--namespace-labels", "modelgate.io/team=nlp",
				"-o", "json", "-f", "-", "-f", ex)
			var findings []struct {
				Policy, Result, Message string
				Exception               string `json:"exception"`
			}
			if err := json.Unmarshal([]byte(stdout), &findings); err != nil {
				t.Fatalf("audit -o json: %v\n%s\n%s", err, stdout, stderr)
			}
			found := false
			for _, f := range findings {
				if f.Policy == "max-gpus-per-pod" {
					found = true
					if f.Result != tc.auditWant {
						t.Errorf("audit: max-gpus-per-pod %s (%s), want %s", f.Result, f.Message, tc.auditWant)
					}
					if tc.auditWant == "skip" && (!strings.HasPrefix(f.Message, "allowed by exception team-a/pretrain-16-gpus (ticket OPS-123)") ||
						f.Exception != "team-a/pretrain-16-gpus") {
						t.Errorf("audit: skip %q (exception %q) does not name the exception", f.Message, f.Exception)
					}
				}
			}
			if !found {
				t.Errorf("audit: no max-gpus-per-pod finding in %s", stdout)
			}
			text, _, _ := runCLI(t, injectedJob, "audit", "--policies", policies, "--namespace-labels", "modelgate.io/team=nlp", "-f", "-", "-f", ex)
			if got := strings.Contains(text, ", 1 allowed by exceptions\n"); got != (tc.auditWant == "skip") {
				t.Errorf("audit: the summary counts the exception %v, want %v:\n%s", got, tc.auditWant == "skip", text)
			}
		})
	}
}
