package offline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
)

// celPolicies are WorkloadPolicies with CEL forms: max-gpus, whose CEL
// agrees with its Rego; gpu-free, whose CEL denies what its Rego allows;
// few-gpus, a warning one whose CEL warns where its Rego does not.
const celPolicies = `apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata:
  name: max-gpus
spec:
  parameters: {max: 1}
  rego: |
    package maxgpus

    deny contains msg if {
    	input.workload.gpu.count > input.parameters.max
    	msg := sprintf("asks for %d GPUs, more than %d", [input.workload.gpu.count, input.parameters.max])
    }
  cel:
    validations:
    - expression: variables.gpus <= variables.parameters.max
      messageExpression: "'asks for ' + string(variables.gpus) + ' GPUs, more than ' + string(variables.parameters.max)"
---
apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata:
  name: gpu-free
spec:
  rego: |
    package gpufree

    deny contains "never" if false
  cel:
    validations:
    - expression: variables.gpus == 0
      message: uses GPUs
---
apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata:
  name: few-gpus
spec:
  enforcementAction: warn
  rego: |
    package fewgpus

    deny contains "never" if false
  cel:
    validations:
    - expression: variables.gpus < 2
      message: uses 2 GPUs or more
`

func gpuPod(gpus string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i",
"resources":{"limits":{"nvidia.com/gpu":"` + gpus + `"}}}]}}`)
}

// TestCELFormsOffline: render and test judge each object with the
// policies' CEL forms too, through the API server's own matcher and
// validator, and say where a policy's two forms disagree.
func TestCELFormsOffline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(path, []byte(celPolicies), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := config.New()
	cs, cel, err := LoadPoliciesWithCEL(ctx, path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAdmitter(cfg, NewEngine(cfg, cs), Namespaces{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetCEL(cel)
	cases := map[string]struct {
		obj          []byte
		wantDecision Decision
		failsClosed  []string
		wantCEL      []string
		wantDisagree []string
	}{
		"over the limit: both forms of max-gpus deny": {
			obj: gpuPod("2"), wantDecision: Denied,
			wantCEL:      []string{"[max-gpus] asks for 2 GPUs, more than 1", "[gpu-free] uses GPUs"},
			wantDisagree: []string{"policy gpu-free: its CEL form denies, Rego does not", "policy few-gpus: its CEL form warns, Rego does not"},
		},
		"within the limit": {
			obj: gpuPod("1"), wantDecision: Allowed,
			wantCEL:      []string{"[gpu-free] uses GPUs"},
			wantDisagree: []string{"policy gpu-free: its CEL form denies, Rego does not"},
		},
		"gpu-free expected to fail closed: that is its agreement": {
			obj: gpuPod("1"), wantDecision: Allowed, failsClosed: []string{"gpu-free"},
			wantCEL: []string{"[gpu-free] uses GPUs"},
		},
		"expected to fail closed where Rego denies too, or where CEL allows": {
			obj: gpuPod("2"), wantDecision: Denied, failsClosed: []string{"max-gpus", "few-gpus", "gone"},
			wantCEL: []string{"[max-gpus] asks for 2 GPUs, more than 1", "[gpu-free] uses GPUs"},
			wantDisagree: []string{
				"policy gone: expected to fail closed in CEL, but it has no CEL form",
				"policy max-gpus: expected to fail closed in CEL, but Rego denies too",
				"policy gpu-free: its CEL form denies, Rego does not",
			},
		},
		"expected to fail closed where its CEL form allows": {
			obj: gpuPod("1"), wantDecision: Allowed, failsClosed: []string{"max-gpus", "gpu-free"},
			wantCEL:      []string{"[gpu-free] uses GPUs"},
			wantDisagree: []string{"policy max-gpus: expected to fail closed in CEL, but its CEL form allows the object"},
		},
		"no GPUs, not opted in: out of both engines' scope": {
			obj: gpuPod("0"), wantDecision: Allowed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := a.Admit(ctx, Request{Object: tc.obj, Namespace: "team-a", User: UserInfo("alice", nil)})
			if err != nil {
				t.Fatal(err)
			}
			if out.Decision != tc.wantDecision {
				t.Errorf("decision %s (%q), want %s", out.Decision, out.Denials, tc.wantDecision)
			}
			if out.CEL == nil {
				t.Fatal("no CEL outcome")
			}
			if diff := cmp.Diff(tc.wantCEL, out.CEL.Denials); diff != "" {
				t.Errorf("CEL denials (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDisagree, out.Disagreements(tc.failsClosed...)); diff != "" {
				t.Errorf("disagreements (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadPoliciesRefusesBrokenCEL: a CEL form that does not compile
// refuses the policy offline as the webhook refuses it at apply, at its
// place in the file, naming the expression.
func TestLoadPoliciesRefusesBrokenCEL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	broken := strings.Replace(celPolicies, "variables.gpus == 0", "variables.gpuz == 0", 1)
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPolicies(context.Background(), path)
	if err == nil {
		t.Fatal("a CEL form that does not compile was loaded")
	}
	for _, want := range []string{path + ":", `WorkloadPolicy "gpu-free"`, "spec.cel.validations[0].expression", "gpuz"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
