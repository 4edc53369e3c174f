package library_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies/celform"
)

// The CEL forms of model-source-allowlist and pinned-model-revisions parse
// modelgate.io/model in CEL, as ParseModelURI parses it for the policies'
// view (a model that does not parse is none). FuzzModelCELForms holds each
// form, compiled and evaluated as the API server does, to ParseModelURI:
// model-source-allowlist with parameters that no model meets (so that it
// denies exactly the models that parse, naming their bucket, organization
// or host) and pinned-model-revisions with its sample's. Its seeds are
// hand-picked edge cases and URIs generated from them; `go test -fuzz
// FuzzModelCELForms ./policies/library/` looks further. The library's cases
// (tests/models.cel.cases.yaml) hold the forms to the Rego itself.

// modelAllowlistParameters list no bucket, organization or host a
// generated URI has (modelViolations leaves out one that has), and every scheme
// but pvc: each model that parses breaks one rule.
var modelAllowlistParameters = map[string]any{
	"schemes": []any{"s3", "gs", "hf", "https", "oci"},
	"buckets": []any{"none.example"},
	"hfOrgs":  []any{"None"},
	"hosts":   []any{"None.Example"},
}

// modelForms are the two policies' CEL forms, compiled.
type modelForms struct {
	allowlist, pinned *celform.Policy
}

func loadModelForms(tb testing.TB) *modelForms {
	tb.Helper()
	return &modelForms{
		allowlist: modelForm(tb, "model-source-allowlist", modelAllowlistParameters),
		pinned:    modelForm(tb, "pinned-model-revisions", nil),
	}
}

// modelForm is a sample's CEL form with parameters (the sample's own when
// nil), generated for the default Configuration in the webhooks' scope.
func modelForm(tb testing.TB, name string, parameters map[string]any) *celform.Policy {
	tb.Helper()
	path := filepath.Join(samplesDir, name+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var wp policyv1.WorkloadPolicy
	if err := yaml.Unmarshal(data, &wp); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	if parameters != nil {
		raw, err := json.Marshal(parameters)
		if err != nil {
			tb.Fatal(err)
		}
		wp.Spec.Parameters = &apiextensionsv1.JSON{Raw: raw}
	}
	keys := celform.Keys{GPUResource: "nvidia.com/gpu", ProductLabel: "nvidia.com/gpu.product"}
	vap, binding, err := celform.Generate(&wp, keys, celform.WebhookScope([]string{"modelgate-system"}))
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	p, err := celform.Compile(vap, binding)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return p
}

// judge is what a form decides on a Pod that opts in with model uri: its
// messages, denials and warnings together.
func (f *modelForms) judge(tb testing.TB, p *celform.Policy, uri string) []string {
	tb.Helper()
	pod := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": "m", "namespace": "team-a",
			"annotations": map[string]any{annotations.Inject: "true", annotations.Model: uri},
		},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "server", "image": "server:v1"}}},
	}}
	d, err := p.Judge(context.Background(), celform.Request{
		Object: pod, Operation: apiadmission.Create,
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{corev1.LabelMetadataName: "team-a"}}},
		UserInfo:  &user.DefaultInfo{Name: "alice@example.com"},
	})
	if err != nil {
		tb.Fatalf("%q: %v", uri, err)
	}
	if !d.Matched {
		tb.Fatalf("%q: the policy does not match the Pod", uri)
	}
	return slices.Concat(d.Deny, d.Warn)
}

// check holds both forms to ParseModelURI on uri.
func (f *modelForms) check(t *testing.T, uri string) {
	t.Helper()
	// An object holds UTF-8 only: a JSON decoder makes anything else U+FFFD.
	uri = strings.ToValidUTF8(uri, "\uFFFD")
	u, err := annotations.ParseModelURI(uri)
	var allow, pin []string
	if err == nil {
		allow, pin = modelViolations(u)
	}
	if scheme, _, _ := strings.Cut(uri, "://"); scheme == "https" && utf8.RuneCountInString(uri) > 8192 {
		// Too long to check in CEL: refused whatever the Rego decides.
		allow = []string{fmt.Sprintf("[model-source-allowlist] modelgate.io/model is an https URL of %d characters, "+
			"longer than the API server can afford to check (8192, more than web servers accept); name a shorter one", utf8.RuneCountInString(uri))}
	}
	why := "it does not parse, which the Rego sees as no model"
	if err == nil {
		why = fmt.Sprintf("it parses as %+v", u)
	}
	if diff := cmp.Diff(allow, f.judge(t, f.allowlist, uri), cmpEmpty); diff != "" {
		t.Errorf("model-source-allowlist's CEL form on %q, where %s (-want +got):\n%s", uri, why, diff)
	}
	if diff := cmp.Diff(pin, f.judge(t, f.pinned, uri), cmpEmpty); diff != "" {
		t.Errorf("pinned-model-revisions's CEL form on %q, where %s (-want +got):\n%s", uri, why, diff)
	}
}

// cmpEmpty makes nil and empty lists equal.
var cmpEmpty = cmp.Transformer("empty", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

// modelViolations are the messages of each policy's Rego on a model that
// parsed: model-source-allowlist's with modelAllowlistParameters,
// pinned-model-revisions's with its sample's (hf and oci).
func modelViolations(u annotations.ModelURI) (allow, pin []string) {
	const a, p = "[model-source-allowlist] ", "[pinned-model-revisions] "
	switch u.Scheme {
	case annotations.SchemePVC:
		allow = append(allow, message(a, fmt.Sprintf(`modelgate.io/model %q uses scheme "pvc"; allowed schemes: "s3", "gs", "hf", "https", "oci"`, u.Raw),
			"modelgate.io/model uses a scheme that spec.parameters.schemes does not list"))
	case annotations.SchemeS3, annotations.SchemeGS:
		if u.Host != "none.example" {
			allow = append(allow, message(a, fmt.Sprintf(`modelgate.io/model %q is in bucket %q; allowed buckets: "none.example"`, u.Raw, u.Host),
				"modelgate.io/model is in a bucket that spec.parameters.buckets does not list"))
		}
	case annotations.SchemeHF:
		if org, _, _ := strings.Cut(u.Path, "/"); org != "None" {
			allow = append(allow, message(a, fmt.Sprintf(`modelgate.io/model %q is from Hugging Face organization %q; allowed organizations: "None"`, u.Raw, org),
				"modelgate.io/model is from a Hugging Face organization that spec.parameters.hfOrgs does not list"))
		}
		switch {
		case u.Revision == "":
			pin = append(pin, message(p, fmt.Sprintf(`modelgate.io/model %q names no revision; pin a commit: hf://%s@<40-hex commit>`, u.Raw, u.Path),
				"modelgate.io/model names no revision; pin a commit: hf://<org>/<repo>@<40-hex commit>"))
		case !u.Pinned():
			pin = append(pin, message(p, fmt.Sprintf(`modelgate.io/model %q names revision %q, a branch or tag that can move; pin a commit: hf://%s@<40-hex commit>`,
				u.Raw, u.Revision, u.Path), "modelgate.io/model names a revision, a branch or tag that can move; pin a commit: hf://<org>/<repo>@<40-hex commit>"))
		}
	case annotations.SchemeHTTPS, annotations.SchemeOCI:
		if !strings.EqualFold(u.Host, "none.example") {
			what := map[annotations.Scheme]string{annotations.SchemeHTTPS: "host", annotations.SchemeOCI: "registry"}[u.Scheme]
			allow = append(allow, message(a, fmt.Sprintf(`modelgate.io/model %q comes from %s %q; allowed hosts: "None.Example"`, u.Raw, what, u.Host),
				"modelgate.io/model comes from a host or registry that spec.parameters.hosts does not list"))
		}
		if u.Scheme == annotations.SchemeOCI && !u.Pinned() {
			pin = append(pin, message(p, fmt.Sprintf(`modelgate.io/model %q names tag %q, which can move; pin a digest: oci://%s/%s@sha256:<64-hex digest>`,
				u.Raw, u.Tag, u.Host, u.Path), "modelgate.io/model names a tag, which can move; pin a digest: oci://<registry>/<repo>@sha256:<64-hex digest>"))
		}
	}
	return allow, pin
}

// message is a violation's message as the API server gives it: prefix and
// msg, or, where that is longer than the API server lets a message
// expression make it (5 KiB), prefix and the validation's fixed message.
func message(prefix, msg, fixed string) string {
	if len(prefix+msg) > 5*1024 {
		return prefix + fixed
	}
	return prefix + msg
}

func FuzzModelCELForms(f *testing.F) {
	forms := loadModelForms(f)
	seeds := modelURISeeds()
	for _, s := range seeds {
		f.Add(s)
	}
	for _, s := range generatedModelURIs(seeds, 1500) {
		f.Add(s)
	}
	f.Fuzz(forms.check)
}

const (
	seedCommit = "0e9e39f249a16976918f6564b8830bc894c89659"
	seedDigest = "sha256:6c3c624b58dbbcd3c0dd82b4c53f04194d1247c6eebdaab7c610cf7d66709b3b"
	seedSHA256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

// modelURISeeds are edge cases of each scheme: of the policies' Rego tests,
// of ParseModelURI's rules, and of net/url and net.SplitHostPort, which it
// reads https and oci URIs with.
func modelURISeeds() []string {
	return []string{
		// s3 and gs: a lower-case bucket of 3 to 63 characters, a relative path.
		"s3://acme-models/llama", "s3://acme-models", "s3://acme-models/", "s3://acme-models/a/",
		"s3://acme-models//x", "s3://acme-models/a//", "s3://acme-models/a/../b", "s3://acme-models/./b",
		"s3://acme-models/.../b", "s3://Acme-models/a", "s3://ab/x", "s3://a.b/x", "s3://-ab/x", "s3:///x",
		"S3://acme-models/llama", "s3:/acme-models/llama", "gs://scratch/llama", "gs://x", "gs://none.example/m",
		"s3://acme-models/pa#th?x=1", "s3://acme-models/llama x", "s3://acme-models/llamaé",
		// hf: org/repo, each a Hugging Face name, and a revision.
		"hf://meta-llama/Llama-3.1-8B", "hf://meta-llama/Llama-3.1-8B@main", "hf://meta-llama/Llama-3.1-8B@" + seedCommit,
		"hf://meta-llama/Llama-3.1-8B@" + strings.ToUpper(seedCommit), "hf://meta-llama/Llama-3.1-8B@0e9e39f",
		"hf://meta-llama/Llama-3.1-8B@" + seedCommit + "0", "hf://meta-llama/Llama-3.1-8B@", "hf://meta-llama/Llama-3.1-8B@refs/pr/1",
		"hf://meta-llama/Llama-3.1-8B@refs//pr", "hf://meta-llama/Llama-3.1-8B@refs/pr/", "hf://meta-llama/Llama-3.1-8B@a..b",
		"hf://meta-llama/Llama-3.1-8B@a@b", "hf://meta-llama/Llama-3.1-8B@" + strings.Repeat("r", 255),
		"hf://meta-llama/Llama-3.1-8B@" + strings.Repeat("r", 256), "hf://meta-llama/Llama-3.1-8B/", "hf://meta-llama/Llama-3.1-8B/x",
		"hf://meta-llama", "hf://meta-llama/", "hf:///Llama", "hf://Meta-Llama/llama", "hf://None/llama", "hf://meta-llama/.hidden",
		"hf://meta-llama/a..b", "hf://meta-llama/a.b", "hf://meta-llama/-a", "hf://meta-llama/a-", "hf://_x/_y", "hf://a/b",
		"hf://meta-llama@main/x", "HF://meta-llama/Llama-3.1-8B", "hf://" + strings.Repeat("o", 96) + "/m", "hf://" + strings.Repeat("o", 97) + "/m",
		// pvc: a claim name and a relative sub path.
		"pvc://models/llama", "pvc://models", "pvc://Models/llama", "pvc://models/../x", "pvc://models/x/", "pvc://", "pvc:///x",
		"pvc://models.v1/x", "pvc://-models/x", "pvc://" + strings.Repeat("c", 254),
		// https: net/url's reading, no credentials, a path, a #sha256= fragment.
		"https://huggingface.co/x/resolve/main/model.safetensors", "https://FILES.example.com/m.gguf",
		"https://files.example.com:443/m", "https://files.example.com:/m", "https://files.example.com:0/m",
		"https://files.example.com:65536/m", "https://files.example.com:00443/m", "https://files.example.com:a/m",
		"https://files.example.com:1:2/m", "https://files.example.com", "https://files.example.com/", "https://files.example.com//x",
		"https://files.example.com/x/../y", "https://files.example.com/x/%2e%2e/y", "https://files.example.com/x%2F%2Fy",
		"https://files.example.com/x%2Fy", "https://files.example.com/x%00y", "https://files.example.com/x%7fy",
		"https://files.example.com/x%7ey", "https://files.example.com/x%c2%80y", "https://files.example.com/x%c2%a0y",
		"https://files.example.com/x%c3%a9y", "https://files.example.com/x%e9y", "https://files.example.com/x%ed%a0%80y",
		"https://files.example.com/x%f0%9f%98%80y", "https://files.example.com/x%f4%90%80%80y", "https://files.example.com/x%zz",
		"https://files.example.com/x%4", "https://files.example.com/x%", "https://files.example.com/x?token=abc",
		"https://files.example.com/x?token=", "https://files.example.com/x?token", "https://files.example.com/x?TOKEN=abc",
		"https://files.example.com/x?%74oken=abc", "https://files.example.com/x?%54OKEN=abc", "https://files.example.com/x?to%6Ben=abc",
		"https://files.example.com/x?X%2DAmz%2DSignature=x", "https://files.example.com/x?access%5Ftoken=2", "https://files.example.com/x?tok+en=1",
		"https://files.example.com/x?tok%en=1", "https://files.example.com/x?a=1;sig=2", "https://files.example.com/x?a=1&&sig=2",
		"https://files.example.com/x?Signature=abc", "https://files.example.com/x?Signature=abc&Key-Pair-Id=K",
		"https://files.example.com/x?Signature=abc&Key-Pair-Id=", "https://files.example.com/x?=abc", "https://files.example.com/x?token==",
		"https://files.example.com/x?#", "https://files.example.com/x?", "https://files.example.com/x#sha256=" + seedSHA256,
		"https://files.example.com/x#sha256=" + strings.ToUpper(seedSHA256), "https://files.example.com/x#",
		"https://files.example.com/x#token=1", "https://files.example.com/x#sha256=" + seedSHA256 + "?token=1",
		"https://files.example.com?x=/y", "https://files.example.com#/y", "https://user@files.example.com/x",
		"https://user:pass@files.example.com/x", "https://@files.example.com/x", "https://fil%65s.example.com/x",
		"https://[::1]:8443/m", "https://[::1]/m", "https://[::1]:/m", "https://[::1]x/m", "https://[::1/m", "https://[1.2.3.4]/m",
		"https://[::ffff:1.2.3.4]/m", "https://[::FFFF:1.2.3.4]/m", "https://[0:0:0:0:0:ffff:102:304]/m", "https://[fe80::1%25en0]/m",
		"https://a[::1]/m", "https://::1/m", "https://1.2.3.4/m", "https://1.2.3.4:8080/m", "https://01.2.3.4/m", "https://host_name/m",
		"https://-host/m", "https://ho..st/m", "https://none.example/m", "https:///m", "https://", "https:/host/m",
		"https://files.example.com/" + strings.Repeat("m", 8192-26), "https://files.example.com/" + strings.Repeat("m", 8192-25),
		"https://files.example.com/" + strings.Repeat("é", 8192-26), "https://files.example.com/m?" + strings.Repeat("a=1&", 30000),
		"https://files.example.com/" + strings.Repeat("%c3%a9", 30000), "s3://acme-models/" + strings.Repeat("m/", 60000),
		// oci: registry[:port], a repository, a tag or a sha256 digest.
		"oci://registry.acme.internal/models/llama:v1", "oci://registry.acme.internal/models/llama@" + seedDigest,
		"oci://registry.acme.internal/models/llama:v1@" + seedDigest, "oci://REGISTRY.ACME.INTERNAL/models/llama:v1",
		"oci://registry.acme.internal:5000/models/llama:v1", "oci://registry.acme.internal:/models/llama:v1",
		"oci://registry.acme.internal:+5000/models/llama:v1", "oci://registry.acme.internal:0/models/llama:v1",
		"oci://registry.acme.internal:99999/models/llama:v1", "oci://registry.acme.internal:x/models/llama:v1",
		"oci://localhost/models/llama:v1", "oci://localhost:5000/model:v1@" + seedDigest, "oci://LOCALHOST/models/llama:v1",
		"oci://registry/models/llama:v1", "oci://ghcr.io/models/llama", "oci://ghcr.io/models/llama:", "oci://ghcr.io/models/llama@",
		"oci://ghcr.io/models/llama@sha256:abc", "oci://ghcr.io/models/llama@" + seedDigest + "@" + seedDigest,
		"oci://ghcr.io/models/llama@" + strings.ToUpper(seedDigest), "oci://ghcr.io/models/Llama:v1", "oci://ghcr.io/models/llama:.v1",
		"oci://ghcr.io/models/llama:v1/x", "oci://ghcr.io/models//llama:v1", "oci://ghcr.io/models/llama/:v1",
		"oci://ghcr.io/models__llama:v1", "oci://ghcr.io/models___llama:v1", "oci://ghcr.io/models--llama:v1",
		"oci://ghcr.io/m:" + strings.Repeat("t", 128), "oci://ghcr.io/m:" + strings.Repeat("t", 129), "oci://ghcr.io/:v1",
		"oci://ghcr.io/", "oci://ghcr.io", "oci:///models/llama:v1", "oci://user@ghcr.io/models/llama:v1",
		"oci://[::1]:5000/models/llama:v1", "oci://[::1]/models/llama:v1", "oci://::1/models/llama:v1",
		"oci://fe80::1:5000/models/llama:v1", "oci://[::1/models/llama:v1", "oci://::1]/models/llama:v1",
		"oci://[[::1]]/models/llama:v1", "oci://[::1]]:5000/models/llama:v1", "oci://[::1]:5000:6000/models/llama:v1",
		"oci://[::ffff:1.2.3.4]:5000/models/llama:v1", "oci://::ffff:1.2.3.4/models/llama:v1", "oci://1.2.3.4:5000/models/llama:v1",
		"oci://[1.2.3.4]:5000/models/llama:v1", "oci://[fe80::1%25en0]:5000/models/llama:v1", "oci://a:b:c/models/llama:v1",
		"oci://[]:5000/models/llama:v1", "oci://]/models/llama:v1", "oci://None.Example/m:v1",
		// Neither.
		"ftp://models.example.com/llama", "://x", "junk", "", "s3://acme-models/\nx",
	}
}

// generatedModelURIs are n URIs made from seeds by inserting, deleting and
// replacing characters and escapes, and swapping schemes, always the same.
func generatedModelURIs(seeds []string, n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	pieces := []string{
		"/", ":", "@", "?", "#", "%", "[", "]", ".", "_", "-", "+", "=", "&", ";", "~", "!", "a", "A", "z", "0", "f",
		"%2e", "%2F", "%c2", "%80", "%25", "%74", "::", "sha256=", "sha256:", "token=x", "Key-Pair-Id=k", "Signature=s",
		"@main", "@" + seedCommit, "..", "//", "[::1]", "localhost", ":5000", " ", "é",
	}
	schemes := []string{"s3://", "gs://", "hf://", "pvc://", "https://", "oci://"}
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		s := seeds[r.IntN(len(seeds))]
		for range 1 + r.IntN(4) {
			i := r.IntN(len(s) + 1)
			switch op := r.IntN(7); {
			case op < 3:
				s = s[:i] + pieces[r.IntN(len(pieces))] + s[i:]
			case op < 5 && i < len(s):
				s = s[:i] + s[i+1:]
			case op < 6:
				j := min(len(s), i+r.IntN(5))
				s = s[:i] + pieces[r.IntN(len(pieces))] + s[j:]
			default:
				if _, rest, ok := strings.Cut(s, "://"); ok {
					s = schemes[r.IntN(len(schemes))] + rest
				}
			}
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
