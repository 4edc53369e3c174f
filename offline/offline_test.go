package offline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/api/annotations"
)

func TestSplitDocuments(t *testing.T) {
	type doc struct {
		Index, Line int
		JSON        string
	}
	cases := map[string]struct {
		in   string
		want []doc
		errs []string
	}{
		"one document": {in: "a: 1\n", want: []doc{{1, 1, `{"a":1}`}}},
		"separators with comments, empty and comment-only documents skipped": {
			in:   "---\na: 1\n--- # second\n# only a comment\n---\n\n...\nb: [x]\n---\n",
			want: []doc{{1, 2, `{"a":1}`}, {2, 8, `{"b":["x"]}`}},
		},
		"a separator must start the line": {in: "a: |\n  ---\n  x\n", want: []doc{{1, 1, `{"a":"---\nx\n"}`}}},
		"errors name the document and the line in the file": {
			in:   "a: 1\n---\nb: 1\nb: 2\n---\n- x\n---\nc: 1\n",
			want: []doc{{1, 1, `{"a":1}`}, {4, 8, `{"c":1}`}},
			errs: []string{
				`f.yaml: document 2 (line 3): yaml: unmarshal errors:` + "\n" + `  line 4: key "b" already set in map`,
				`f.yaml: document 3 (line 6): ` + ErrNotObject.Error(),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			docs, err := SplitDocuments("f.yaml", []byte(tc.in))
			got := make([]doc, 0, len(docs))
			for _, d := range docs {
				got = append(got, doc{d.Index, d.Line, string(d.JSON)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("documents (-want +got):\n%s", diff)
			}
			var errs []string
			for _, e := range Unjoin(err) {
				if _, ok := errors.AsType[*DocumentError](e); !ok {
					t.Errorf("error %v is not a *DocumentError", e)
				}
				errs = append(errs, e.Error())
			}
			if diff := cmp.Diff(tc.errs, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSentToPolicies(t *testing.T) {
	const gpu = "nvidia.com/gpu"
	deployment := func(templateAnnotations, limits string) string {
		return `{"kind":"Deployment","metadata":{},"spec":{"template":{"metadata":{"annotations":` + templateAnnotations +
			`},"spec":{"containers":[{"name":"c","resources":{"limits":` + limits + `}}]}}}}`
	}
	enabled := map[string]string{annotations.NamespaceInjection: annotations.InjectionEnabled}
	scoped := map[string]string{PolicyScopeLabel: PolicyScopeAll}
	cases := map[string]struct {
		obj    string
		labels map[string]string
		want   bool
	}{
		"opted in":                    {obj: deployment(`{"modelgate.io/inject":"true"}`, `{}`), want: true},
		"a malformed opt-in is sent":  {obj: deployment(`{"modelgate.io/inject":"yes"}`, `{}`), want: true},
		"not opted in":                {obj: deployment(`{}`, `{}`)},
		"opted out":                   {obj: deployment(`{"modelgate.io/inject":"false"}`, `{}`)},
		"requests GPUs":               {obj: deployment(`{}`, `{"nvidia.com/gpu":"1"}`), want: true},
		"opted out but requests GPUs": {obj: deployment(`{"modelgate.io/inject":"false"}`, `{"nvidia.com/gpu":"1"}`), want: true},
		// Any */gpu resource, MIG instances and resource claims count,
		// as in the webhook's match conditions (issue 15, item 6).
		"another vendor's GPUs":             {obj: deployment(`{}`, `{"amd.com/gpu":"1"}`), want: true},
		"MIG instances":                     {obj: deployment(`{}`, `{"nvidia.com/mig-1g.10gb":"1"}`), want: true},
		"a resource that is not a GPU":      {obj: deployment(`{}`, `{"example.com/fpga":"1"}`)},
		"enabled namespace":                 {obj: deployment(`{}`, `{}`), labels: enabled, want: true},
		"enabled namespace, opted out":      {obj: deployment(`{"modelgate.io/inject":"false"}`, `{}`), labels: enabled},
		"widened scope sends even opt-outs": {obj: deployment(`{"modelgate.io/inject":"false"}`, `{}`), labels: scoped, want: true},
		"a CronJob's pod template": {obj: `{"kind":"CronJob","spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"modelgate.io/inject":"true"}}}}}}}`,
			want: true},
		"a Pod's init container": {obj: `{"kind":"Pod","spec":{"initContainers":[{"resources":{"requests":{"nvidia.com/gpu":"1"}}}]}}`,
			want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, why, err := SentToPolicies([]byte(tc.obj), tc.labels, gpu)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("sent %v (%s), want %v", got, why, tc.want)
			}
			if !got && why == "" {
				t.Error("not sent, with no reason")
			}
		})
	}
}

func TestLoadCaseFile(t *testing.T) {
	const head = "apiVersion: test.modelgate.io/v1alpha1\nkind: PolicyTest\n"
	pod := "object: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n"
	cases := map[string]struct {
		in   string
		want string // in the error ({file} is the file's path); "" when the file is valid
	}{
		"valid": {in: head + "namespace: team-a\ncases:\n- name: a\n  " + pod + "  expect: {decision: denied, messages: [x], warnings: []}\n"},
		"unknown field": {in: head + "cases:\n- name: a\n  " + pod + "  expect: {decisions: allowed}\n",
			want: `unknown field "cases[0].expect.decisions"`},
		"wrong kind": {in: "apiVersion: test.modelgate.io/v1alpha1\nkind: Test\ncases:\n- name: a\n  " + pod + "  expect: {decision: allowed}\n",
			want: `kind: Unsupported value: "Test": supported values: "PolicyTest"`},
		"no cases": {in: head, want: "cases: Required value: must list at least one case"},
		"duplicate names, bad decision, object and file": {
			in: head + "cases:\n- name: a\n  " + pod + "  expect: {decision: allowed}\n- name: a\n  " + pod + "  file: x.yaml\n  expect: {decision: deny}\n",
			want: "cases[1].name: Duplicate value: \"a\"\n" +
				"{file}: cases[1].file: Invalid value: \"x.yaml\": must not be set with object\n" +
				"{file}: cases[1].expect.decision: Unsupported value: \"deny\": supported values: \"allowed\", \"warned\", \"denied\"",
		},
		"messages with allowed, warnings with warned": {
			in: head + "cases:\n- name: a\n  " + pod + "  expect: {decision: allowed, messages: [x]}\n- name: b\n  " + pod + "  expect: {decision: warned, warnings: [x]}\n",
			want: "cases[0].expect.messages: Invalid value: [\"x\"]: must be empty when the decision is allowed\n" +
				"{file}: cases[1].expect.warnings: Forbidden: only with decision denied; the warnings of a warned object are its messages",
		},
		"an update case: valid; oldObject and oldFile together, or an oldObject that is no object: invalid": {
			in: head + "cases:\n- name: a\n  " + pod + "  oldObject: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n  expect: {decision: allowed}\n" +
				"- name: b\n  " + pod + "  oldObject: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n  oldFile: old.yaml\n  expect: {decision: allowed}\n" +
				"- name: c\n  " + pod + "  oldObject: [1]\n  expect: {decision: allowed}\n",
			want: "cases[1].oldFile: Invalid value: \"old.yaml\": must not be set with oldObject\n" +
				"{file}: cases[2].oldObject: Invalid value: \"[1]\": must be a Kubernetes object",
		},
		"bad namespace and label": {in: head + "namespace: Team_A\nnamespaceLabels: {\"bad key!\": x}\ncases:\n- name: a\n  " + pod + "  expect: {decision: allowed}\n",
			want: "namespace: Invalid value: \"Team_A\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.cases.yaml")
			if err := os.WriteFile(path, []byte(tc.in), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadCaseFile(path)
			want := strings.ReplaceAll(tc.want, "{file}", path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tc.want)
			case !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), path+": "):
				t.Errorf("error:\n%v\nwant it to name %s and contain:\n%s", err, path, want)
			}
		})
	}
}

func TestLoadPoliciesFromWorkloadPolicyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	src := `apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata: {name: a}
spec:
  rego: |
    package a
    deny contains "no" if true
---
apiVersion: v1
kind: ConfigMap
metadata: {name: skipped}
---
apiVersion: policy.modelgate.io/v1
kind: WorkloadPolicy
metadata: {name: a}
spec:
  rego: |
    package a2
    warn contains "no" if true
`
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, err := LoadPolicies(context.Background(), file)
	if len(cs) != 1 || cs[0].Name() != "a" {
		t.Errorf("loaded %d policies, want a alone", len(cs))
	}
	want := file + `: document 3 (line 13): WorkloadPolicy "a" is defined twice (first at ` + file + `: document 1 (line 1))`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}

	if _, err := LoadPolicies(context.Background(), t.TempDir()); !errors.Is(err, ErrNoPolicies) {
		t.Errorf("an empty directory: error %v, want ErrNoPolicies", err)
	}
}

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels(" modelgate.io/team=nlp, modelgate.io/ignore=")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"modelgate.io/team": "nlp", "modelgate.io/ignore": ""}, got); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"team", "bad key=x", "k=bad value"} {
		if _, err := ParseLabels(bad); err == nil {
			t.Errorf("ParseLabels(%q) gave no error", bad)
		}
	}
}
