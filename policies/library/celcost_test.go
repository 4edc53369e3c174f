package library_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies/celform"
)

// BenchmarkCELForms: what each library policy's generated
// ValidatingAdmissionPolicy costs to judge the typical opted-in model
// server as modelgate injected it, through the API server's own matcher
// and validator (celform.Policy.Judge), each against the same baseline in
// the same run: a policy whose one validation is `true`.
//
//	go test ./policies/library/ -run '^$' -bench CELForms -benchmem
func BenchmarkCELForms(b *testing.B) {
	ctx := context.Background()
	cfg := config.New()
	path := filepath.Join(samplesDir, "max-gpus-per-pod.yaml")
	compiled, err := offline.LoadPolicies(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	a, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, compiled), offline.Namespaces{Default: map[string]string{"modelgate.io/team": "nlp"}})
	if err != nil {
		b.Fatal(err)
	}
	out, err := a.Admit(ctx, offline.Request{Object: []byte(typicalServer), Namespace: "team-a", User: offline.UserInfo("alice@example.com", nil)})
	if err != nil || out.Decision != offline.Allowed || !out.Mutated {
		b.Fatalf("admitting the typical server: %v %s %v %q", err, out.Decision, out.Mutated, out.Denials)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(out.Object); err != nil {
		b.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{
		corev1.LabelMetadataName: "team-a", "modelgate.io/team": "nlp"}}}
	req := celform.Request{Object: obj, Operation: apiadmission.Create, Namespace: ns,
		UserInfo: &user.DefaultInfo{Name: "alice@example.com"}}
	names := []string{"baseline", "allowed-gpu-products", "gpu-limits-required", "max-gpus-per-pod", "model-source-allowlist",
		"no-privileged-gpu", "pinned-model-revisions", "required-owner-team", "serving-readiness-probe"}
	for _, name := range names {
		file := filepath.Join(samplesDir, name+".yaml")
		if name == "baseline" {
			file = filepath.Join(b.TempDir(), "baseline.yaml")
			writeFile(b, file, baselinePolicy)
		}
		p := celForm(b, cfg, file)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				d, err := p.Judge(ctx, req)
				if err != nil || !d.Matched || len(d.Deny)+len(d.Warn) > 0 {
					b.Fatalf("%s: %v matched %v %q %q", name, err, d.Matched, d.Deny, d.Warn)
				}
			}
		})
	}
}

// baselinePolicy is judged like the library's, and holds always.
const baselinePolicy = `apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata: {name: baseline}
spec:
  match:
    kinds: [Pod, Deployment, StatefulSet, Job, CronJob]
  cel:
    validations:
    - expression: "true"
  rego: |
    package baseline
`

// typicalServer is a vLLM Deployment that opts in with the library's
// sample model and product: every library policy allows it.
var typicalServer = strings.TrimSpace(`
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"llama","namespace":"team-a"},
 "spec":{"replicas":1,"selector":{"matchLabels":{"app":"llama"}},
  "template":{"metadata":{"labels":{"app":"llama"},"annotations":{
    "modelgate.io/inject":"true",
    "modelgate.io/model":"hf://meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
    "modelgate.io/model-size":"20Gi","modelgate.io/engine":"vllm","modelgate.io/gpu":"1",
    "modelgate.io/gpu-product":"NVIDIA-H100-80GB-HBM3"}},
   "spec":{"containers":[{"name":"vllm","image":"vllm/vllm-openai:v0.11.0",
     "args":["--model","/models/model"]}]}}}}`)

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}
