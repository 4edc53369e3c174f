package library_test

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies/library"
)

var update = flag.Bool("update", false, "rewrite spec.rego in config/samples/policies from the library")

// samplesDir holds one WorkloadPolicy per library policy.
const samplesDir = "../../config/samples/policies"

// packagePrefix is where every library policy lives: its package is this
// prefix and its name with dashes turned into underscores.
const packagePrefix = "data.modelgate.library."

// v1 parses modules as Rego v1, as modelgate's engine does.
var v1 = ast.ParserOptions{RegoVersion: ast.RegoV1}

func TestNames(t *testing.T) {
	want := []string{
		"allowed-gpu-products",
		"gpu-limits-required",
		"max-gpus-per-pod",
		"model-source-allowlist",
		"no-privileged-gpu",
		"pinned-model-revisions",
		"required-owner-team",
		"serving-readiness-probe",
	}
	if diff := cmp.Diff(want, library.Names()); diff != "" {
		t.Errorf("Names() mismatch (-want +got):\n%s", diff)
	}
}

// TestRego runs every policy's _test.rego the way `opa test` does, compiled
// with its policy alone (as the engine compiles each policy alone) in strict
// mode. Each Rego test is a subtest: TestRego/<policy>/<test rule>.
func TestRego(t *testing.T) {
	total := 0
	for _, name := range library.Names() {
		t.Run(name, func(t *testing.T) {
			modules := map[string]*ast.Module{name + ".rego": parse(t, name+".rego")}
			if test := name + library.TestSuffix; exists(test) {
				modules[test] = parse(t, test)
			}
			results := runTests(t, modules)
			if len(results) == 0 {
				t.Fatalf("no Rego test ran: want test_ rules in %s%s", name, library.TestSuffix)
			}
			total += len(results)
			for _, r := range results {
				t.Run(r.Name, func(t *testing.T) {
					switch {
					case r.Error != nil:
						t.Errorf("%s: error: %v%s", r.Location, r.Error, output(r))
					case r.Fail:
						t.Errorf("%s: FAIL%s%s", r.Location, failedExpr(r), output(r))
					case r.Skip:
						t.Errorf("%s: skipped: the shipped library has no todo_ tests", r.Location)
					}
				})
			}
		})
	}
	t.Logf("%d Rego tests", total)
}

// runTests runs the test rules of modules, sorted by name.
func runTests(t *testing.T, modules map[string]*ast.Module) []*tester.Result {
	t.Helper()
	ch, err := tester.NewRunner().
		SetCompiler(compiler().WithEnablePrintStatements(true)).
		CapturePrintOutput(true).
		EnableTracing(true).
		SetModules(modules).
		RunTests(t.Context(), nil)
	if err != nil {
		t.Fatalf("compiling: %v", err)
	}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b *tester.Result) int { return strings.Compare(a.Name, b.Name) })
	return results
}

// compiler is strict, parses Rego v1, and leaves out the built-ins that reach
// the network, which modelgate's engine does not offer.
func compiler() *ast.Compiler {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		return b.Name == "http.send" || b.Name == "net.lookup_ip_addr"
	})
	return ast.NewCompiler().
		WithStrict(true).
		WithCapabilities(caps).
		WithDefaultRegoVersion(ast.RegoV1)
}

func exists(file string) bool {
	_, err := fs.Stat(library.FS, file)
	return err == nil
}

// TestEveryPolicyHasTests checks that each policy has a test file with test_
// rules that reads the policy, and that every test file belongs to a policy.
func TestEveryPolicyHasTests(t *testing.T) {
	for _, name := range library.Names() {
		t.Run(name, func(t *testing.T) {
			file := name + library.TestSuffix
			src, err := library.FS.ReadFile(file)
			if err != nil {
				t.Fatalf("policy %s has no tests: want %s beside it", name, file)
			}
			m, err := ast.ParseModuleWithOpts(file, string(src), v1)
			if err != nil {
				t.Fatalf("parsing %s: %v", file, err)
			}
			tests := 0
			for _, r := range m.Rules {
				if strings.HasPrefix(r.Head.Name.String(), tester.TestPrefix) {
					tests++
				}
			}
			if tests == 0 {
				t.Errorf("%s has no %s rules", file, tester.TestPrefix)
			}
			policy := packagePrefix + pkgName(name)
			if got, want := m.Package.Path.String(), policy+"_test"; got != want {
				t.Errorf("%s: package is %s, want %s", file, got, want)
			}
			if !slices.ContainsFunc(m.Imports, func(i *ast.Import) bool { return i.Path.String() == policy }) {
				t.Errorf("%s does not import %s", file, policy)
			}
		})
	}

	entries, err := library.FS.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if policy, ok := strings.CutSuffix(e.Name(), library.TestSuffix); ok && !slices.Contains(library.Names(), policy) {
			t.Errorf("%s tests a policy that does not exist: want %s.rego beside it", e.Name(), policy)
		}
	}
}

// TestStrict compiles each policy alone, as the engine does: as Rego v1, with
// the engine's built-ins and the compiler's strict checks (those of
// `opa check --strict`). It also checks the shape the engine relies on and
// the library's naming: the package, and deny and warn as sets.
func TestStrict(t *testing.T) {
	for _, name := range library.Names() {
		t.Run(name, func(t *testing.T) {
			m := parse(t, name+".rego")
			c := compiler()
			if c.Compile(map[string]*ast.Module{name + ".rego": m}); c.Failed() {
				t.Fatalf("strict compile: %v", c.Errors)
			}
			if got, want := m.Package.Path.String(), packagePrefix+pkgName(name); got != want {
				t.Errorf("package is %s, want %s", got, want)
			}
			rules := 0
			for _, r := range m.Rules {
				if n := r.Head.Name.String(); n == "deny" || n == "warn" {
					rules++
					if r.Head.RuleKind() != ast.MultiValue {
						t.Errorf("%s:%d: %s must be a set: %s contains msg if {...}", name, r.Location.Row, n, n)
					}
				}
			}
			if rules == 0 {
				t.Error("no deny or warn rule")
			}
		})
	}
}

// workloadPolicy is the part of the WorkloadPolicy CRD the samples use.
type workloadPolicy struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Rego              string `json:"rego"`
		EnforcementAction string `json:"enforcementAction"`
		Match             struct {
			Kinds              []string              `json:"kinds"`
			Namespaces         []string              `json:"namespaces"`
			ExcludedNamespaces []string              `json:"excludedNamespaces"`
			NamespaceSelector  *metav1.LabelSelector `json:"namespaceSelector"`
		} `json:"match"`
		Parameters    map[string]any `json:"parameters"`
		FailurePolicy string         `json:"failurePolicy"`
		// CEL is the policy's CEL form, where it has one: modelgate test
		// policies/library holds it to the Rego on every case.
		CEL *policyv1.CELForm `json:"cel,omitempty"`
	} `json:"spec"`
}

// TestSamples checks that config/samples/policies holds one WorkloadPolicy
// per policy whose spec.rego is the library file byte for byte, and that
// kustomization.yaml lists exactly them. With -update it rewrites spec.rego.
func TestSamples(t *testing.T) {
	var want []string
	for _, name := range library.Names() {
		want = append(want, name+".yaml")
		t.Run(name, func(t *testing.T) {
			src, err := library.FS.ReadFile(name + ".rego")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(samplesDir, name+".yaml")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("want a sample WorkloadPolicy for %s: %v", name, err)
			}
			if *update {
				data = rewriteRego(t, path, data, src)
			}
			var p workloadPolicy
			if err := yaml.UnmarshalStrict(data, &p); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			checkSample(t, name, &p)
			if p.Spec.Rego != string(src) {
				t.Errorf("%s: spec.rego differs from policies/library/%s.rego (run go test ./policies/library/ -update):\n%s",
					path, name, cmp.Diff(string(src), p.Spec.Rego))
			}
		})
	}

	data, err := os.ReadFile(filepath.Join(samplesDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if diff := cmp.Diff(want, k.Resources); diff != "" {
		t.Errorf("kustomization.yaml resources mismatch (-want +got):\n%s", diff)
	}
}

func checkSample(t *testing.T, name string, p *workloadPolicy) {
	t.Helper()
	if p.APIVersion != "policy.modelgate.io/v1" || p.Kind != "WorkloadPolicy" {
		t.Errorf("is %s %s, want policy.modelgate.io/v1 WorkloadPolicy", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != name || p.Metadata.Namespace != "" {
		t.Errorf("metadata is %q/%q, want the cluster-scoped name %q", p.Metadata.Namespace, p.Metadata.Name, name)
	}
	if a := p.Spec.EnforcementAction; a != "deny" && a != "warn" && a != "dryrun" {
		t.Errorf("spec.enforcementAction is %q, want deny, warn or dryrun", a)
	}
	if f := p.Spec.FailurePolicy; f != "deny" && f != "allow" {
		t.Errorf("spec.failurePolicy is %q, want deny or allow", f)
	}
	kinds := []string{"Pod", "Deployment", "StatefulSet", "Job", "CronJob", "AIInference", "ResourceClaim", "ResourceClaimTemplate"}
	for _, k := range p.Spec.Match.Kinds {
		if !slices.Contains(kinds, k) {
			t.Errorf("spec.match.kinds has %q, want one of %v", k, kinds)
		}
	}
	// A parameter the policy never mentions is a typo or a stale sample.
	for key := range p.Spec.Parameters {
		if !strings.Contains(p.Spec.Rego, strconv.Quote(key)) {
			t.Errorf("spec.parameters.%s is not read by the policy", key)
		}
	}
}

// rewriteRego replaces the block after the sample's last line, "  rego: |",
// with src indented by four spaces, writes the file and returns it.
func rewriteRego(t *testing.T, path string, data, src []byte) []byte {
	t.Helper()
	const key = "\n  rego: |\n"
	i := bytes.LastIndex(data, []byte(key))
	if i < 0 {
		t.Fatalf("%s: cannot update: want spec.rego as its last field, %q", path, strings.TrimSpace(key))
	}
	out := append([]byte{}, data[:i+len(key)]...)
	for line := range strings.Lines(string(src)) {
		if line != "\n" {
			out = append(out, "    "...)
		}
		out = append(out, line...)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func parse(t *testing.T, file string) *ast.Module {
	t.Helper()
	src, err := library.FS.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ast.ParseModuleWithOpts(file, string(src), v1)
	if err != nil {
		t.Fatalf("parsing %s as Rego v1: %v", file, err)
	}
	return m
}

func pkgName(policy string) string {
	return strings.ReplaceAll(policy, "-", "_")
}

// failedExpr finds, in a failed test's trace, the last expression of the
// test's own body that failed.
func failedExpr(r *tester.Result) string {
	if r.Location == nil {
		return ""
	}
	first, last := r.Location.Row, r.Location.Row+strings.Count(string(r.Location.Text), "\n")
	for i := len(r.Trace) - 1; i >= 0; i-- {
		e := r.Trace[i]
		if e.Op != topdown.FailOp || e.Location == nil || e.Location.File != r.Location.File {
			continue
		}
		if _, ok := e.Node.(*ast.Expr); ok && e.Location.Row >= first && e.Location.Row <= last {
			return fmt.Sprintf("\nfailed at %s: %s", e.Location, e.Location.Text)
		}
	}
	return ""
}

func output(r *tester.Result) string {
	if len(r.Output) == 0 {
		return ""
	}
	return "\noutput:\n" + string(r.Output)
}
