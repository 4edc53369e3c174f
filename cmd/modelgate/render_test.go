package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/test/harnesses/builders"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const (
	goldenDir  = "testdata/golden"
	samples    = "../../config/samples/policies"
	updateHint = "run `go test ./cmd/modelgate -update` to accept the new output"
	// webhookGoldenConfig is the Configuration the webhook's golden cases
	// run under.
	webhookGoldenConfig = "../../webhook/testdata/golden-config.yaml"
)

// runCLI runs modelgate in process with the arguments and stdin, and
// returns what it printed and its exit status.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// golden compares got with testdata/golden/<name>, rewriting it with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = builders.MaskSeals(got)
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v; %s", path, err, updateHint)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s\n%s", path, diff, updateHint)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRender runs modelgate render on the manifests under testdata/render
// and compares stdout and stderr with testdata/golden/<case>.stdout.yaml
// and <case>.stderr.txt, and the exit status with the case's. An error
// (exit status 2) must print no object at all.
func TestRender(t *testing.T) {
	vllm := "testdata/render/vllm-deployment.yaml"
	cases := map[string]struct {
		args  []string
		stdin string
		code  int
	}{
		// Exit 0: everything allowed.
		"vllm-no-policies": {args: []string{"-f", vllm}},
		"passthrough":      {args: []string{"-f", "testdata/render/passthrough.yaml"}},
		// Custom resources with modelgate.io/ annotations: a warning, still exit 0.
		"custom-resources": {args: []string{"-f", "testdata/render/custom-resources.yaml"}},
		"namespace-and-list": {args: []string{"-f", "testdata/render/namespace-and-list.yaml",
			"--policies", samples, "--user", "bob"}},
		"config-loader-image": {args: []string{"-f", vllm, "--config", "testdata/config/loader.yaml",
			"--groups", "ml-engineers"}},
		"config-custom-loaders": {args: []string{"-f", "testdata/render/custom-loaders.yaml", "--config", "testdata/config/loader.yaml"}},
		"stdin": {args: []string{"-f", "-", "--namespace", "team-b"},
			stdin: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {modelgate.io/inject: \"true\", modelgate.io/gpu: \"1\"}\nspec:\n  containers: [{name: c, image: i}]\n"},
		// A directory's manifest files, in name order.
		"directory": {args: []string{"-f", "testdata/config"}},
		// Exit 1: denied by a policy or by the mutating webhook.
		"single-policy-file": {args: []string{"-f", vllm, "--policies", samples + "/max-gpus-per-pod.yaml"}, code: 1},
		"vllm-library-denied": {args: []string{"-f", vllm, "--policies", samples,
			"--namespace-labels", "modelgate.io/team=nlp", "--user", "alice@example.com"}, code: 1},
		"malformed-annotation": {args: []string{"-f", "testdata/render/malformed-annotation.yaml",
			"--policies", samples}, code: 1},
		// The webhook's 422s speak of what the user wrote (issue 14).
		"models-mount-clash":      {args: []string{"-f", "testdata/render/models-mount-clash.yaml"}, code: 1},
		"gpu-annotation-conflict": {args: []string{"-f", "testdata/render/gpu-annotation-conflict.yaml"}, code: 1},
		// A forged injection record removes nothing (issue 15).
		"forged-record": {args: []string{"-f", "testdata/render/forged-record.yaml", "--user", "mallory"}},
		// Exit 2: errors.
		"bad-documents":        {args: []string{"-f", "testdata/render/bad-documents.yaml"}, code: 2},
		"undecodable-object":   {args: []string{"-f", "testdata/render/undecodable-object.yaml"}, code: 2},
		"broken-policies":      {args: []string{"-f", vllm, "--policies", "testdata/policies/broken"}, code: 2},
		"broken-policy-dir":    {args: []string{"-f", vllm, "--policies", "testdata/policies/broken-rego"}, code: 2},
		"invalid-config":       {args: []string{"-f", vllm, "--config", "testdata/config/invalid.yaml"}, code: 2},
		"bad-namespace-labels": {args: []string{"-f", vllm, "--namespace-labels", "modelgate.io/team"}, code: 2},
		"bad-namespace":        {args: []string{"-f", vllm, "--namespace", "Team_A"}, code: 2},
		"no-manifests":         {args: []string{"--policies", samples}, code: 2},
		"missing-file":         {args: []string{"-f", "testdata/render/no-such-file.yaml"}, code: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, tc.stdin, append([]string{"render"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if code == 2 {
				if stdout != "" {
					t.Errorf("an error printed objects on stdout:\n%s", stdout)
				}
			} else {
				golden(t, name+".stdout.yaml", stdout)
			}
			golden(t, name+".stderr.txt", stderr)
		})
	}
}

// Objects modelgate does not handle, and handled ones it leaves alone,
// come out exactly as they went in, comments included.
func TestRenderPassesThroughVerbatim(t *testing.T) {
	for _, file := range []string{"testdata/render/passthrough.yaml", "testdata/render/custom-resources.yaml"} {
		stdout, stderr, code := runCLI(t, "", "render", "-f", file)
		if code != 0 {
			t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
		}
		if want := readFile(t, file); stdout != want {
			t.Errorf("stdout differs from %s (-want +got):\n%s", file, cmp.Diff(want, stdout))
		}
	}
}

// render gives what the webhook gives: each golden input of the mutating
// webhook's own tests (webhook/testdata/golden, admitted there by alice in
// namespace ml-research of team research, under the Configuration of
// webhook/testdata/golden-config.yaml) renders to its golden output.
// Both are compared as typed objects, since the webhook's tests send the
// object as the API server would, with its empty sections and defaults.
func TestRenderMatchesWebhookGolden(t *testing.T) {
	ins, err := filepath.Glob("../../webhook/testdata/golden/*.in.yaml")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no webhook golden inputs (err %v)", err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, "", "render", "-f", in,
				"--config", webhookGoldenConfig,
				"--namespace-labels", "modelgate.io/team=research", "--user", "alice@example.com")
			if code != 0 {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
			}
			got := typed(t, []byte(builders.MaskSeals(stdout)))
			want := typed(t, []byte(readFile(t, strings.TrimSuffix(in, ".in.yaml")+".out.yaml")))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("render differs from the webhook's golden output (-want +got):\n%s", diff)
			}
		})
	}
}

// typed decodes a manifest into its typed object.
func typed(t *testing.T, y []byte) any {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(y, &tm); err != nil {
		t.Fatal(err)
	}
	obj := builders.Empty(tm.Kind)
	if err := yaml.UnmarshalStrict(y, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// Issue 29, item 4: render is a fixed point with --record-key (rendering
// its own output again with the same key changes nothing); without a key,
// a second render of rendered output warns that the record was sealed by
// another key instead of dropping it silently; a bad key file is named.
func TestRenderRecordKey(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	if err := os.WriteFile(key, bytes.Repeat([]byte("k"), 32), 0o600); err != nil {
		t.Fatal(err)
	}
	first, errOut, code := runCLI(t, "", "render", "-f", "../../config/samples/deployment.yaml", "--record-key", key)
	if code != 0 || !strings.Contains(first, "modelgate.io/injected") {
		t.Fatalf("first render: exit %d, %s\n%s", code, errOut, first)
	}
	again, errOut, code := runCLI(t, first, "render", "-f", "-", "--record-key", key)
	if code != 0 || again != first {
		t.Errorf("a second render with the same key changed the output (exit %d, %s):\n%s", code, errOut, cmp.Diff(first, again))
	}
	if strings.Contains(errOut, "sealed by another key") {
		t.Errorf("warned with the key that sealed it: %s", errOut)
	}

	_, errOut, code = runCLI(t, first, "render", "-f", "-")
	if code != 0 || !strings.Contains(errOut, "warning: its injection record (modelgate.io/injected) was sealed by another key than this run's") ||
		!strings.Contains(errOut, "--record-key FILE") {
		t.Errorf("a second render without the key: exit %d, want a warning naming --record-key:\n%s", code, errOut)
	}
	if _, errOut, _ := runCLI(t, "", "render", "-f", "../../config/samples/deployment.yaml"); strings.Contains(errOut, "sealed by another key") {
		t.Errorf("warned about a manifest that carries no record: %s", errOut)
	}

	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, "", "render", "-f", "../../config/samples/deployment.yaml", "--record-key", short); code != 2 || !strings.Contains(errOut, "--record-key "+short+": ") {
		t.Errorf("a 3-byte key: exit %d, %s; want 2 naming the flag and file", code, errOut)
	}
}
