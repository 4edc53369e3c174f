package audit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
	"github.com/modelgate/modelgate/validators"
)

const (
	goldenDir       = "../webhook/testdata/golden"
	goldenConfig    = "../webhook/testdata/golden-config.yaml"
	goldenNamespace = "ml-research"
)

var namespaces = offline.Namespaces{ByName: map[string]map[string]string{
	goldenNamespace: {annotations.NamespaceTeam: "research"},
	"opted-in":      {annotations.NamespaceInjection: annotations.InjectionEnabled},
}}

func goldenCfg(t testing.TB) *config.Configuration {
	t.Helper()
	c, err := config.Load(goldenConfig)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// library is an engine holding the policy library's sample
// WorkloadPolicies.
func library(t *testing.T) *policies.Engine {
	t.Helper()
	wps, err := builders.SamplePolicies("../config/samples/policies")
	if err != nil {
		t.Fatal(err)
	}
	var cs []*policies.Compiled
	for _, wp := range wps {
		c, err := validators.CompileWorkloadPolicy(context.Background(), wp)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	e := policies.NewEngine(policies.Options{})
	e.Swap(policies.NewSet(cs...))
	return e
}

// storedJSON reads a manifest as the API server would store it: through its
// typed object, every field of it present.
func storedJSON(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		t.Fatal(err)
	}
	obj := builders.Empty(tm.Kind)
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// goldens are the golden cases' inputs by name.
func goldens(t testing.TB) map[string][]byte {
	t.Helper()
	ins, err := filepath.Glob(filepath.Join(goldenDir, "*.in.yaml"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("golden inputs: %v, %d", err, len(ins))
	}
	out := map[string][]byte{}
	for _, in := range ins {
		out[strings.TrimSuffix(filepath.Base(in), ".in.yaml")] = storedJSON(t, in)
	}
	return out
}

// admitted is the object as the webhooks admit it when alice creates it.
func admitted(t *testing.T, cfg *config.Configuration, e *policies.Engine, raw []byte) offline.Outcome {
	t.Helper()
	a, err := offline.NewAdmitter(cfg, e, namespaces)
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.Admit(context.Background(), offline.Request{Object: raw, Namespace: goldenNamespace,
		User: authenticationv1.UserInfo{Username: "alice@example.com", Groups: []string{"system:authenticated"}}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rules returns the injection's findings as "rule: message", but the
// mutating webhook's warnings.
func rules(o Outcome) []string {
	var out []string
	for _, f := range o.Findings {
		if f.Policy == InjectionPolicy && f.Rule != "warning" {
			out = append(out, f.Rule+": "+f.Message)
		}
	}
	return out
}

// TestInjection: a golden object as injected today has nothing to report;
// as written (opted in, never injected) its injection is missing; injected
// under an older Configuration (another loader image) it is stale.
func TestInjection(t *testing.T) {
	cfg := goldenCfg(t)
	empty := policies.NewEngine(policies.Options{})
	older := goldenCfg(t)
	older.Injection.Loader.Image = "registry.example.com/old/modelgate:v0.9.0"
	ctx := context.Background()
	for name, raw := range goldens(t) {
		t.Run(name, func(t *testing.T) {
			now := New(cfg, empty, namespaces)
			injected := admitted(t, cfg, empty, raw)
			if !injected.Mutated {
				t.Fatalf("not injected: %+v", injected)
			}
			o, err := now.Audit(ctx, injected.Object)
			if err != nil {
				t.Fatal(err)
			}
			if o.Skipped != "" || len(rules(o)) > 0 {
				t.Errorf("injected today: skipped %q, findings %q; want none", o.Skipped, rules(o))
			}

			o, err = now.Audit(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			got := rules(o)
			if len(got) != 1 || !strings.HasPrefix(got[0], "missing: opted in but carries no injection") || o.Worst() != Fail {
				t.Errorf("as written: findings %q, worst %q; want one missing injection, fail", got, o.Worst())
			}

			old := admitted(t, older, empty, raw)
			o, err = now.Audit(ctx, old.Object)
			if err != nil {
				t.Fatal(err)
			}
			got = rules(o)
			// Only where modelgate's loader runs, and on a template: a
			// Pod's or a Job's spec cannot change, and the webhook leaves
			// it alone on an UPDATE.
			wantStale := strings.Contains(string(old.Object), older.Injection.Loader.Image) && o.Object.Kind != "Pod" && o.Object.Kind != "Job"
			switch {
			case wantStale && (len(got) != 1 || !strings.HasPrefix(got[0], "stale: its injection is older") ||
				!strings.Contains(got[0], "/initContainers/") || o.Worst() != Warn):
				t.Errorf("injected with another loader image: findings %q, worst %q; want one stale injection naming the loader, warn", got, o.Worst())
			case !wantStale && len(got) > 0:
				t.Errorf("injected with another loader image that does not run: findings %q, want none", got)
			}
		})
	}
}

// TestPolicies: the policy findings of an injected object are what the
// validating webhook says when it is created, line for line.
func TestPolicies(t *testing.T) {
	cfg := goldenCfg(t)
	e := library(t)
	a := New(cfg, e, namespaces)
	fail, warn := 0, 0
	for name, raw := range goldens(t) {
		injected := admitted(t, cfg, policies.NewEngine(policies.Options{}), raw)
		want := admitted(t, cfg, e, raw)
		o, err := a.Audit(context.Background(), injected.Object)
		if err != nil {
			t.Fatal(err)
		}
		var denials, warnings []string
		for _, f := range o.Findings {
			if f.Category != CategoryPolicy {
				continue
			}
			line := "[" + f.Policy + "] " + f.Message
			if f.Result == Fail {
				denials, fail = append(denials, line), fail+1
			} else {
				warnings, warn = append(warnings, line), warn+1
			}
		}
		if diff := cmp.Diff(want.Denials, denials, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: denials (-webhook +audit):\n%s", name, diff)
		}
		// The mutating webhook's own warnings are the injection's findings.
		want.Warnings = slices.DeleteFunc(want.Warnings, func(w string) bool { return strings.HasPrefix(w, "[modelgate] ") })
		if diff := cmp.Diff(want.Warnings, warnings, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: warnings (-webhook +audit):\n%s", name, diff)
		}
		if n := len(o.Passed) + len(slices.CompactFunc(slices.Clone(o.Findings), func(a, b Finding) bool { return a.Policy == b.Policy })); n == 0 {
			t.Errorf("%s: no policy applied", name)
		}
	}
	if fail == 0 || warn == 0 {
		t.Errorf("%d failures and %d warnings over the goldens: want some of each", fail, warn)
	}
}

func TestSkipsAndOptIn(t *testing.T) {
	cfg := goldenCfg(t)
	a := New(cfg, policies.NewEngine(policies.Options{}), namespaces)
	ctx := context.Background()
	gpuDeployment := func(ns, inject string) []byte {
		ann := ""
		if inject != "" {
			ann = `,"annotations":{"modelgate.io/inject":"` + inject + `"}`
		}
		return []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"train","namespace":"` + ns + `"},` +
			`"spec":{"selector":{"matchLabels":{"app":"train"}},"template":{"metadata":{"labels":{"app":"train"}` + ann + `},` +
			`"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"nvidia.com/gpu":"2"}}}]}}}}`)
	}
	cases := map[string]struct {
		raw         []byte
		wantSkipped string
		wantPolicy  []string
	}{
		"a ConfigMap": {raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"ml-research"}}`),
			wantSkipped: "not a workload modelgate injects"},
		"a ReplicaSet's Pod": {raw: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x-1","namespace":"ml-research",` +
			`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"x","uid":"u","controller":true}]},"spec":{"containers":[{"name":"c","image":"i"}]}}`),
			wantSkipped: "made by ReplicaSet x from its template, which is audited"},
		"GPUs opted out where the namespace opts in": {raw: gpuDeployment("opted-in", "false"),
			wantPolicy: []string{GPUOptInPolicy}},
		"GPUs opted out elsewhere":    {raw: gpuDeployment(goldenNamespace, "false")},
		"GPUs not opted in elsewhere": {raw: gpuDeployment(goldenNamespace, "")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o, err := a.Audit(ctx, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if o.Skipped != tc.wantSkipped {
				t.Errorf("Skipped = %q, want %q", o.Skipped, tc.wantSkipped)
			}
			var got []string
			for _, f := range o.Findings {
				got = append(got, f.Policy)
			}
			if diff := cmp.Diff(tc.wantPolicy, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestForgedRecord: a record written by hand on a workload never injected
// does not make its missing injection a stale one where the auditor holds
// the record key; a sealed record does.
func TestForgedRecord(t *testing.T) {
	key, err := seal.New(seal.Generate())
	if err != nil {
		t.Fatal(err)
	}
	cfg := goldenCfg(t)
	cfg.RecordKey = key
	empty := policies.NewEngine(policies.Options{})
	a := New(cfg, empty, namespaces)
	raw := goldens(t)["vllm-deployment-hf"]

	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	meta["annotations"] = map[string]any{annotations.Injected: `{"mutators":["model-loader"],"settings":"0"}`}
	forged, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	o, err := a.Audit(context.Background(), forged)
	if err != nil {
		t.Fatal(err)
	}
	if got := rules(o); len(got) != 1 || !strings.HasPrefix(got[0], "missing: ") {
		t.Errorf("forged record: findings %q, want one missing injection", got)
	}

	sealed := admitted(t, cfg, empty, raw)
	o, err = a.Audit(context.Background(), sealed.Object)
	if err != nil {
		t.Fatal(err)
	}
	if got := rules(o); len(got) > 0 {
		t.Errorf("sealed injection of today: findings %q, want none", got)
	}
}
