// Command policyprofile (make profile-policies) profiles the policy
// library rule by rule: each WorkloadPolicy of config/samples/policies
// evaluated alone, --runs times, on the policy input of the typical
// injected vLLM Deployment (the view modelgate builds, as JSON), first
// timed without a tracer, then under OPA's profiler, whose expressions are
// printed by the time they took, with their source lines. It measures and
// prints; it asserts nothing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/profiler"
	"github.com/open-policy-agent/opa/v1/rego"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/test/harnesses/builders"
)

// namespace is where the profiled Deployment is, with a team.
const namespace = "team-a"

func main() {
	fs := flag.NewFlagSet("policyprofile", flag.ContinueOnError)
	runs := fs.Int("runs", 2000, "evaluations of each policy, timed and then profiled")
	top := fs.Int("top", 5, "expressions printed per policy")
	root := fs.String("root", ".", "the repository root")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(*root, *runs, *top); err != nil {
		fmt.Fprintf(os.Stderr, "policyprofile: %v\n", err)
		os.Exit(1)
	}
}

func run(root string, runs, top int) error {
	if runs < 1 || top < 1 {
		return errors.New("--runs and --top must be positive")
	}
	wps, err := builders.SamplePolicies(filepath.Join(root, "config", "samples", "policies"))
	if err != nil {
		return err
	}
	view, err := injectedView()
	if err != nil {
		return err
	}
	ctx := context.Background()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "policy\tµs per evaluation\tprofiled expressions (time share, evaluations, line)\n")
	var total time.Duration
	for _, wp := range wps {
		per, lines, err := profile(ctx, wp, view, runs, top)
		if err != nil {
			return fmt.Errorf("%s: %w", wp.Name, err)
		}
		total += per
		fmt.Fprintf(tw, "%s\t%.1f\t%s\n", wp.Name, float64(per.Nanoseconds())/1000, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t%s\n", l)
		}
	}
	fmt.Fprintf(tw, "all, one query each\t%.1f\t\n", float64(total.Nanoseconds())/1000)
	return tw.Flush()
}

// injectedView is input.workload of the sample vLLM Deployment as the
// mutating webhook leaves it: admitted offline, then read back by a policy
// that denies with the view as its message.
func injectedView() (json.RawMessage, error) {
	cfg := config.New()
	key, err := seal.New(seal.Generate())
	if err != nil {
		return nil, err
	}
	cfg.RecordKey = key
	ns := offline.Namespaces{ByName: map[string]map[string]string{namespace: {"modelgate.io/team": "ml-platform"}}}
	echo, err := policies.Compile(context.Background(), policies.Policy{Name: "echo",
		Module: "package echo\n\ndeny contains json.marshal(input.workload)\n"})
	if err != nil {
		return nil, err
	}
	admitter, err := offline.NewAdmitter(cfg, offline.NewEngine(cfg, []*policies.Compiled{echo}), ns)
	if err != nil {
		return nil, err
	}
	dep := builders.New("Deployment", builders.Options{Namespace: namespace, Name: "llm-server",
		TemplateAnnotations: builders.SampleServingAnnotations(builders.SampleGPUProducts)})
	dep.GetObjectKind().SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	raw, err := json.Marshal(dep)
	if err != nil {
		return nil, err
	}
	out, err := admitter.Admit(context.Background(), offline.Request{Object: raw, Namespace: namespace,
		User: authenticationv1.UserInfo{Username: "alice@example.com"}})
	if err != nil {
		return nil, err
	}
	if len(out.Denials) != 1 || !strings.HasPrefix(out.Denials[0], "[echo] ") {
		return nil, fmt.Errorf("the echo policy did not hand the view back: %v", out.Denials)
	}
	return json.RawMessage(strings.TrimPrefix(out.Denials[0], "[echo] ")), nil
}

// profile times the policy's evaluation, then profiles it, and returns the
// time per evaluation and its top expressions, each "share, evaluations,
// file:row: source".
func profile(ctx context.Context, wp *policyv1.WorkloadPolicy, view json.RawMessage, runs, top int) (time.Duration, []string, error) {
	mod, err := ast.ParseModuleWithOpts(wp.Name+".rego", wp.Spec.Rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return 0, nil, err
	}
	params := json.RawMessage("{}")
	if wp.Spec.Parameters != nil {
		params = wp.Spec.Parameters.Raw
	}
	var input any
	doc := `{"workload":` + string(view) + `,"object":null,"oldObject":null,"parameters":` + string(params) + `}`
	if err := json.Unmarshal([]byte(doc), &input); err != nil {
		return 0, nil, err
	}
	value, err := ast.InterfaceToValue(input)
	if err != nil {
		return 0, nil, err
	}
	query := mod.Package.Path.String() + ".deny"
	prepared, err := rego.New(rego.Query(query), rego.ParsedModule(mod)).PrepareForEval(ctx)
	if err != nil {
		return 0, nil, err
	}
	start := time.Now()
	for range runs {
		if _, err := prepared.Eval(ctx, rego.EvalParsedInput(value)); err != nil {
			return 0, nil, err
		}
	}
	per := time.Since(start) / time.Duration(runs)

	p := profiler.New()
	for range runs {
		if _, err := prepared.Eval(ctx, rego.EvalParsedInput(value), rego.EvalQueryTracer(p)); err != nil {
			return 0, nil, err
		}
	}
	stats := p.ReportTopNResults(top, []string{"total_time_ns"})
	var all int64
	for _, s := range p.ReportTopNResults(1<<20, []string{"total_time_ns"}) {
		all += s.ExprTimeNs
	}
	src := strings.Split(wp.Spec.Rego, "\n")
	lines := make([]string, 0, len(stats))
	for _, s := range stats {
		text := ""
		if s.Location != nil && s.Location.Row >= 1 && s.Location.Row <= len(src) {
			text = strings.TrimSpace(src[s.Location.Row-1])
		}
		row := 0
		if s.Location != nil {
			row = s.Location.Row
		}
		lines = append(lines, fmt.Sprintf("%3.0f%%  %6d  %d: %s", 100*float64(s.ExprTimeNs)/float64(max(all, 1)), s.NumEval, row, text))
	}
	if len(lines) == 0 {
		lines = []string{"(nothing profiled)"}
	}
	return per, lines, nil
}
