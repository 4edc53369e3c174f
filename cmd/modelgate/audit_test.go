package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
)

const (
	auditGolden = "../../webhook/testdata/golden/"
	auditConfig = "../../webhook/testdata/golden-config.yaml"
)

// TestAudit runs modelgate audit on the golden manifests as written
// (opted in, never injected) and as render injects them: the first fail
// for their missing injection, the second pass but for what the policies
// say, and the exit status follows --fail-on.
func TestAudit(t *testing.T) {
	files := []string{auditGolden + "vllm-deployment-hf.in.yaml", auditGolden + "training-job-s3.in.yaml"}
	args := []string{"--config", auditConfig, "--namespace-labels", "modelgate.io/team=research"}
	asWritten := append([]string{"audit"}, args...)
	for _, f := range files {
		asWritten = append(asWritten, "-f", f)
	}
	stdout, stderr, code := runCLI(t, "", asWritten...)
	if code != 1 {
		t.Fatalf("as written: exit status %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"FAIL  Deployment ml-research/llama-chat [modelgate-injection] opted in but carries no injection",
		"kubectl -n ml-research rollout restart deployment/llama-chat applies it",
		"FAIL  Job ml-research/finetune-llama [modelgate-injection] opted in but carries no injection",
		"2 workloads audited: 2 failures, 0 warnings, 0 errors",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("as written: stdout has no %q:\n%s", want, stdout)
		}
	}

	render := []string{"render", "--config", auditConfig, "--namespace-labels", "modelgate.io/team=research", "--user", "alice@example.com"}
	for _, f := range files {
		render = append(render, "-f", f)
	}
	injected, stderr, code := runCLI(t, "", render...)
	if code != 0 {
		t.Fatalf("render: exit status %d; stderr:\n%s", code, stderr)
	}
	stdout, stderr, code = runCLI(t, injected, append(append([]string{"audit"}, args...), "-f", "-")...)
	if code != 0 || stdout != "2 workloads audited: 0 failures, 0 warnings, 0 errors\n" {
		t.Errorf("injected: exit status %d, stdout:\n%s\nstderr:\n%s\nwant 0 and nothing found", code, stdout, stderr)
	}

	// The library's policies: warnings alone pass, unless --fail-on warn.
	withPolicies := append(append([]string{"audit"}, args...), "--policies", "../../config/samples/policies", "-o", "json", "-f", "-")
	stdout, stderr, code = runCLI(t, injected, withPolicies...)
	var findings []struct{ Kind, Name, Policy, Result, Message string }
	if err := json.Unmarshal([]byte(stdout), &findings); err != nil {
		t.Fatalf("-o json: %v\n%s\n%s", err, stdout, stderr)
	}
	worst := "warn"
	for _, f := range findings {
		if f.Result != "warn" {
			worst = f.Result
		}
	}
	if len(findings) == 0 || (worst == "warn") != (code == 0) {
		t.Errorf("with policies: %d findings, worst %s, exit status %d", len(findings), worst, code)
	}
	if _, _, code := runCLI(t, injected, append(withPolicies, "--fail-on", "warn")...); len(findings) > 0 && code != 1 {
		t.Errorf("--fail-on warn with %d findings: exit status %d, want 1", len(findings), code)
	}
}

func TestAuditFlags(t *testing.T) {
	for args, want := range map[string]string{
		"-f x.yaml -o yaml":          `-o "yaml": must be text or json`,
		"-f x.yaml --fail-on never":  `--fail-on "never": must be fail or warn`,
		"-f x.yaml extra":            `unexpected arguments ["extra"]`,
		"-f testdata/does-not-exist": "the manifests cannot be read",
	} {
		_, stderr, code := runCLI(t, "", append([]string{"audit"}, strings.Fields(args)...)...)
		if code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("audit %s: exit status %d, stderr %q; want 2 and %q", args, code, stderr, want)
		}
	}
}

// TestAuditRecordKey: an object modelgate injected under another process's
// record key is judged as injected today without --record-key (its records
// taken as modelgate's) and with the right key, and its unverifiable
// records count as missing with a wrong one.
func TestAuditRecordKey(t *testing.T) {
	cfg, err := config.Load(auditConfig)
	if err != nil {
		t.Fatal(err)
	}
	secret := seal.Generate()
	if cfg.RecordKey, err = seal.New(secret); err != nil {
		t.Fatal(err)
	}
	a, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, nil),
		offline.Namespaces{Default: map[string]string{"modelgate.io/team": "research"}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := offline.SplitDocuments("in", []byte(readFile(t, auditGolden+"vllm-deployment-hf.in.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Admit(context.Background(), offline.Request{Object: in[0].JSON, Namespace: "ml-research",
		User: authenticationv1.UserInfo{Username: "alice@example.com"}})
	if err != nil || !out.Mutated {
		t.Fatalf("admitting: %v, mutated %v", err, out.Mutated)
	}
	dir := t.TempDir()
	obj, right, wrong := filepath.Join(dir, "obj.json"), filepath.Join(dir, "right"), filepath.Join(dir, "wrong")
	list := filepath.Join(dir, "list.json") // as kubectl get -o json prints several objects
	listed := []byte(`{"apiVersion":"v1","kind":"List","items":[` + string(out.Object) + `,` + string(out.Object) + `]}`)
	for file, data := range map[string][]byte{obj: out.Object, right: secret, wrong: seal.Generate(), list: listed} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"audit", "--config", auditConfig, "--namespace-labels", "modelgate.io/team=research", "-f", obj}
	for name, tc := range map[string]struct {
		key  []string
		want string
		code int
	}{
		"no key":    {nil, "1 workloads audited: 0 failures, 0 warnings, 0 errors\n", 0},
		"right key": {[]string{"--record-key", right}, "1 workloads audited: 0 failures, 0 warnings, 0 errors\n", 0},
		"wrong key": {[]string{"--record-key", wrong}, "[modelgate-injection] opted in but carries no injection", 1},
		"a List":    {[]string{"-f", list}, "3 workloads audited: 0 failures, 0 warnings, 0 errors\n", 0},
	} {
		stdout, stderr, code := runCLI(t, "", append(args, tc.key...)...)
		if code != tc.code || !strings.Contains(stdout, tc.want) {
			t.Errorf("%s: exit status %d, stdout:\n%s\nstderr:\n%s\nwant %d and %q", name, code, stdout, stderr, tc.code, tc.want)
		}
	}
}
