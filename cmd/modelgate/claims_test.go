package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// userClaimPod uses a resource claim from the template "accel".
const userClaimPod = `apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: team-a}
spec:
  resourceClaims:
  - {name: gpus, resourceClaimTemplateName: accel}
  containers:
  - name: train
    image: registry.acme.internal/trainer:v3
    resources:
      claims: [{name: gpus}]
`

func accelTemplate(count string) string {
	return `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: accel, namespace: team-a}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, count: ` + count + `}
`
}

// render and audit count the GPUs of a Pod's own resource claims from the
// templates among the manifests, as the webhook does from its cache. The
// sample's CEL form cannot (a claim's template is another object): it
// fails closed, and render says the API server would refuse what Rego
// allows, with the backstop on.
func TestClaimsOffline(t *testing.T) {
	policies := "../../config/samples/policies/max-gpus-per-pod.yaml"
	for name, tc := range map[string]struct {
		template   string
		code       int
		want       []string
		auditFails bool
	}{
		"a template asking for 2": {template: accelTemplate("2"), code: 1, want: []string{
			"Pod team-a/trainer: allowed\n  cel: denied",
			`[max-gpus-per-pod] pod uses resource claim "gpus", whose devices the API server's policy cannot count`,
			"error: policy max-gpus-per-pod: its CEL form denies, Rego does not",
		}},
		"a template asking for 12": {template: accelTemplate("12"), code: 1, auditFails: true,
			want: []string{`[max-gpus-per-pod] pod asks for 12 GPUs (container "train"); at most 8 are allowed per pod in namespace "team-a"`}},
		"no template": {code: 1, auditFails: true,
			want: []string{`[max-gpus-per-pod] pod uses resource claim "gpus", whose ResourceClaimTemplate or ResourceClaim was not found in namespace "team-a"`}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"render", "--policies", policies, "--namespace-labels", "modelgate.io/team=nlp"}
			for i, doc := range []string{userClaimPod, tc.template} {
				if doc == "" {
					continue
				}
				f := filepath.Join(dir, []string{"pod.yaml", "template.yaml"}[i])
				if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-f", f)
			}
			_, stderr, code := runCLI(t, "", args...)
			if code != tc.code {
				t.Errorf("render: exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("render: stderr lacks %q:\n%s", w, stderr)
				}
			}
			// The audit judges with Rego alone.
			args[0] = "audit"
			_, stderr, code = runCLI(t, "", args...)
			if (code != 0) != tc.auditFails {
				t.Errorf("audit: exit %d, want failing = %v; stderr:\n%s", code, tc.auditFails, stderr)
			}
		})
	}
}
