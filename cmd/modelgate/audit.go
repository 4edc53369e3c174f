package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/audit"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
	policyview "github.com/modelgate/modelgate/policies/workload"
	"github.com/modelgate/modelgate/validators"
	"github.com/modelgate/modelgate/webhook"
)

const auditUsage = `Usage: modelgate audit [-f FILE...] [flags]

Judges workloads that already exist with modelgate's own webhook code:
  - the policies in force now (a WorkloadPolicy's deny is a failure, its
    warnings, warn and dry-run policies are warnings, an evaluation error
    is an error);
  - the injection: a workload that opted in but carries none (admitted
    while modelgate was unreachable, or before it opted in) fails; one
    whose injection is older than the Configuration and annotations in
    force (another loader image, changed settings) is a warning;
  - a workload that asks for GPUs but opts out in a namespace labelled
    modelgate.io/injection=enabled is a warning.

With -f it audits the manifests as stored objects (kubectl get -o yaml),
with the policies of --policies and the Configuration of --config.
modelgate seals the owner labels and injection records it writes; with
--record-key the audit verifies them as the webhook does, and without it
it takes them as modelgate's (a record written by hand then passes).
On a cluster the key is read from the Secret modelgate-record-key in
--modelgate-namespace (a cluster administrator may read it); when it
cannot be, the records are taken as stored, with a warning. Without
-f it audits the cluster of --kubeconfig: every Pod, Deployment,
StatefulSet, Job and CronJob (of --namespace), with the cluster's Ready
WorkloadPolicies and the Configuration in the ConfigMap modelgate-config
of --modelgate-namespace, unless --policies and --config say otherwise.
Pods and Jobs a controller made are audited on the controller's template.

One line per finding on stdout (-o json: the findings as JSON). Exit
status: 0 when nothing fails (warnings only, with --fail-on fail), 1 when
something fails or errs (or warns, with --fail-on warn), 2 on an error.

Flags:
`

// auditFlags are the audit subcommand's flags.
type auditFlags struct {
	files           stringList
	policies        string
	configFile      string
	namespace       string
	namespaceLabels string
	kubeconfig      string
	systemNamespace string
	output          string
	failOn          string
	recordKey       string
}

func (f *auditFlags) bind(fs *flag.FlagSet) {
	fs.Var(&f.files, "f", "manifest `FILE` of stored objects, or a directory of them (\"-\" is stdin); repeatable; none audits the cluster")
	fs.StringVar(&f.policies, "policies", "", "policy directory (.rego files), or a directory or file of WorkloadPolicy objects at `PATH`; the cluster's Ready WorkloadPolicies when auditing a cluster without it")
	fs.StringVar(&f.configFile, "config", "", "Configuration `FILE`; the cluster's when auditing a cluster without it, else the defaults")
	fs.StringVar(&f.namespace, "namespace", "", "with -f: namespace of objects that name none (default \"default\"); on a cluster: audit only this namespace")
	fs.StringVar(&f.namespaceLabels, "namespace-labels", "", "with -f: `labels` of the namespaces, k=v,...; a Namespace object among the manifests gives its own")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster or $KUBECONFIG when empty")
	fs.StringVar(&f.systemNamespace, "modelgate-namespace", "modelgate-system", "the namespace modelgate runs in, whose ConfigMap modelgate-config holds the Configuration")
	fs.StringVar(&f.output, "o", "text", "output: text or json")
	fs.StringVar(&f.failOn, "fail-on", "fail", "exit 1 on findings of this result or worse: fail (fail and error) or warn")
	fs.StringVar(&f.recordKey, "record-key", "", "`FILE` holding modelgate's record key, byte for byte (the Secret modelgate-record-key's data.key, base64-decoded), to verify the owners and injection records modelgate sealed; on a cluster it is read from the Secret when this is not given")
}

func auditCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelgate audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, auditUsage); fs.PrintDefaults() }
	var f auditFlags
	f.bind(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "modelgate audit: %s\n", indentRest(err.Error(), "  "))
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return fail(fmt.Errorf("unexpected arguments %q; manifests are given with -f", fs.Args()))
	case f.output != "text" && f.output != "json":
		return fail(fmt.Errorf("-o %q: must be text or json", f.output))
	case f.failOn != "fail" && f.failOn != "warn":
		return fail(fmt.Errorf("--fail-on %q: must be fail or warn", f.failOn))
	}
	ctx := logr.NewContext(context.Background(), logr.Discard())

	var (
		outcomes []audit.Outcome
		err      error
	)
	if len(f.files) > 0 {
		outcomes, err = f.auditManifests(ctx, stdin, stderr)
	} else {
		outcomes, err = f.auditCluster(ctx, stderr)
	}
	if err != nil {
		return fail(err)
	}
	if err := printFindings(stdout, f.output, outcomes); err != nil {
		return fail(err)
	}
	for i := range outcomes {
		switch outcomes[i].Worst() {
		case audit.Fail, audit.Error:
			return 1
		case audit.Warn:
			if f.failOn == "warn" {
				return 1
			}
		}
	}
	return 0
}

// loadConfigAndPolicies loads --config and --policies, when given.
func (f *auditFlags) loadConfigAndPolicies(ctx context.Context) (*config.Configuration, []*policies.Compiled, error) {
	cfg := config.New()
	var err error
	if f.configFile != "" {
		if cfg, err = config.Load(f.configFile); err != nil {
			return nil, nil, err
		}
	}
	var cs []*policies.Compiled
	if f.policies != "" {
		if cs, err = offline.LoadPolicies(ctx, f.policies); err != nil {
			return nil, nil, fmt.Errorf("policies do not load:\n%w", err)
		}
	}
	return cfg, cs, nil
}

// auditManifests audits the objects of -f.
func (f *auditFlags) auditManifests(ctx context.Context, stdin io.Reader, stderr io.Writer) ([]audit.Outcome, error) {
	labels, err := offline.ParseLabels(f.namespaceLabels)
	if err != nil {
		return nil, fmt.Errorf("--namespace-labels: %w", err)
	}
	cfg, cs, err := f.loadConfigAndPolicies(ctx)
	if err != nil {
		return nil, err
	}
	docs, err := readManifests(f.files, stdin)
	if err != nil {
		return nil, fmt.Errorf("the manifests cannot be read:\n%w", err)
	}
	ns := offline.Namespaces{Default: labels, ByName: namespaceObjects(docs)}
	trust, err := f.useRecordKey(ctx, cfg, nil, stderr)
	if err != nil {
		return nil, err
	}
	defaultNS := f.namespace
	if defaultNS == "" {
		defaultNS = offline.DefaultNamespace
	}
	engine := offline.NewEngine(cfg, cs)
	if err := useExceptions(engine, cfg, cs, f.policies, docs, defaultNS); err != nil {
		return nil, fmt.Errorf("exceptions do not load:\n%w", err)
	}
	a := audit.New(cfg, engine, ns)
	claims, err := offline.ClaimsIn(docs, defaultNS)
	if err != nil {
		return nil, err
	}
	a.SetClaims(claims)
	var out []audit.Outcome
	for i := range docs {
		d := &docs[i]
		objects, err := listItems(d.JSON)
		if err != nil {
			return nil, &offline.DocumentError{Doc: d, Err: err}
		}
		for j, obj := range objects {
			raw, err := withNamespace(obj, defaultNS)
			if err == nil {
				raw, err = trust(raw)
			}
			var o audit.Outcome
			if err == nil {
				o, err = a.Audit(ctx, raw)
			}
			if err != nil {
				if len(objects) > 1 || j > 0 {
					err = fmt.Errorf("items[%d]: %w", j, err)
				}
				return nil, &offline.DocumentError{Doc: d, Err: err}
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// listItems returns the items of a v1 List (what kubectl get -o yaml
// prints for several objects), or the object itself.
func listItems(raw []byte) ([][]byte, error) {
	ti, err := offline.ReadTypeInfo(raw)
	if err != nil {
		return nil, err
	}
	if ti.APIVersion != "v1" || ti.Kind != "List" {
		return [][]byte{raw}, nil
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("items: %w", err)
	}
	out := make([][]byte, len(list.Items))
	for i, item := range list.Items {
		out[i] = item
	}
	return out, nil
}

// withNamespace sets metadata.namespace when the object names none.
func withNamespace(raw []byte, ns string) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	m, _ := obj["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		obj["metadata"] = m
	}
	if s, _ := m["namespace"].(string); s != "" {
		return raw, nil
	}
	m["namespace"] = ns
	return json.Marshal(obj)
}

// auditCluster audits the workloads of the cluster.
func (f *auditFlags) auditCluster(ctx context.Context, stderr io.Writer) ([]audit.Outcome, error) {
	rc, err := restConfig(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := policyv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cfg, cs, err := f.loadConfigAndPolicies(ctx)
	if err != nil {
		return nil, err
	}
	if f.configFile == "" {
		var cm corev1.ConfigMap
		switch err := c.Get(ctx, client.ObjectKey{Namespace: f.systemNamespace, Name: "modelgate-config"}, &cm); {
		case err == nil:
			if cfg, err = config.Parse([]byte(cm.Data["configuration.yaml"])); err != nil {
				return nil, fmt.Errorf("ConfigMap %s/modelgate-config: %w", f.systemNamespace, err)
			}
		case client.IgnoreNotFound(err) != nil:
			return nil, fmt.Errorf("reading the Configuration: %w", err)
		}
	}
	if f.policies == "" {
		var wps policyv1.WorkloadPolicyList
		if err := c.List(ctx, &wps); err != nil {
			return nil, fmt.Errorf("listing WorkloadPolicies: %w", err)
		}
		for i := range wps.Items {
			wp := &wps.Items[i]
			comp, err := validators.CompileWorkloadPolicy(ctx, wp)
			if err != nil {
				// Not in force in the cluster either (Ready False).
				continue
			}
			cs = append(cs, comp)
		}
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	labels := offline.Namespaces{ByName: map[string]map[string]string{}}
	for _, n := range nss.Items {
		labels.ByName[n.Name] = n.Labels
	}
	trust, err := f.useRecordKey(ctx, cfg, c, stderr)
	if err != nil {
		return nil, err
	}
	engine := offline.NewEngine(cfg, cs)
	if err := f.clusterExceptions(ctx, c, engine, cfg, cs); err != nil {
		return nil, err
	}
	a := audit.New(cfg, engine, labels)
	claims, err := clusterClaims(ctx, c, f.namespace)
	if err != nil {
		return nil, err
	}
	a.SetClaims(claims)
	var out []audit.Outcome
	err = audit.List(ctx, c, f.namespace, audit.DefaultPageSize, func(raw []byte) error {
		raw, err := trust(raw)
		if err != nil {
			return err
		}
		o, err := a.Audit(ctx, raw)
		if err != nil {
			return err
		}
		out = append(out, o)
		return nil
	})
	return out, err
}

// clusterExceptions applies the cluster's WorkloadPolicyExceptions (those
// of --policies instead, when it is given), judged at the local clock.
func (f *auditFlags) clusterExceptions(ctx context.Context, c client.Client, e *policies.Engine, cfg *config.Configuration, cs []*policies.Compiled) error {
	if f.policies != "" {
		return useExceptions(e, cfg, cs, f.policies, nil, offline.DefaultNamespace)
	}
	var list policyv1.WorkloadPolicyExceptionList
	if err := c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil // an older modelgate: no exceptions
		}
		return fmt.Errorf("listing WorkloadPolicyExceptions: %w", err)
	}
	es := make([]*policies.Exception, 0, len(list.Items))
	for i := range list.Items {
		if ex, err := validators.ExceptionOf(&list.Items[i]); err == nil {
			es = append(es, ex)
		}
	}
	offline.UseExceptions(e, cfg, es, nil)
	return nil
}

// useRecordKey sets cfg's record key: --record-key's, else (on a cluster,
// c not nil) the Secret's. It returns what to do to each object before
// the audit: nothing when the key is known; when it is not, re-seal it
// with a key of this run's, so that its records are taken as modelgate's.
func (f *auditFlags) useRecordKey(ctx context.Context, cfg *config.Configuration, c client.Client, stderr io.Writer) (func([]byte) ([]byte, error), error) {
	asIs := func(raw []byte) ([]byte, error) { return raw, nil }
	if f.recordKey != "" {
		b, err := os.ReadFile(f.recordKey)
		if err != nil {
			return nil, fmt.Errorf("--record-key: %w", err)
		}
		if cfg.RecordKey, err = seal.New(b); err != nil {
			return nil, fmt.Errorf("--record-key %s: %w", f.recordKey, err)
		}
		return asIs, nil
	}
	if c != nil {
		var s corev1.Secret
		err := c.Get(ctx, client.ObjectKey{Namespace: f.systemNamespace, Name: webhook.RecordKeySecret}, &s)
		if err == nil {
			if cfg.RecordKey, err = seal.New(s.Data[webhook.RecordKeyField]); err == nil {
				return asIs, nil
			}
		}
		fmt.Fprintf(stderr, "modelgate audit: the record key (Secret %s/%s) cannot be read: %v; "+
			"owners and injection records are taken as stored, not verified\n", f.systemNamespace, webhook.RecordKeySecret, err)
	}
	key, err := seal.New(seal.Generate())
	if err != nil {
		return nil, err
	}
	cfg.RecordKey = key
	return func(raw []byte) ([]byte, error) { return audit.Reseal(raw, key) }, nil
}

// printFindings writes the findings, as text lines or JSON.
func printFindings(w io.Writer, format string, outcomes []audit.Outcome) error {
	var findings []audit.Finding
	audited := 0
	for _, o := range outcomes {
		if o.Skipped == "" {
			audited++
		}
		findings = append(findings, o.Findings...)
	}
	if format == "json" {
		type jsonFinding struct {
			APIVersion string       `json:"apiVersion"`
			Kind       string       `json:"kind"`
			Namespace  string       `json:"namespace"`
			Name       string       `json:"name"`
			Policy     string       `json:"policy"`
			Rule       string       `json:"rule"`
			Result     audit.Result `json:"result"`
			Category   string       `json:"category"`
			Action     string       `json:"enforcementAction,omitempty"`
			Message    string       `json:"message"`
			Exception  string       `json:"exception,omitempty"`
			Ticket     string       `json:"exceptionTicket,omitempty"`
			ExpiresAt  string       `json:"exceptionExpiresAt,omitempty"`
		}
		out := make([]jsonFinding, 0, len(findings))
		for _, f := range findings {
			out = append(out, jsonFinding{f.Object.APIVersion, f.Object.Kind, f.Object.Namespace, f.Object.Name,
				f.Policy, f.Rule, f.Result, f.Category, f.Action, f.Message, f.Exception, f.Ticket, f.ExpiresAt})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	slices.SortStableFunc(findings, func(a, b audit.Finding) int {
		return strings.Compare(a.Object.Namespace+"/"+a.Object.Name, b.Object.Namespace+"/"+b.Object.Name)
	})
	for _, f := range findings {
		if _, err := fmt.Fprintf(w, "%-5s %s [%s] %s\n", strings.ToUpper(string(f.Result)), f.Object, f.Policy,
			strings.ReplaceAll(f.Message, "\n", " ")); err != nil {
			return err
		}
	}
	var sum audit.Summary
	for i := range outcomes {
		sum.Add(&outcomes[i])
	}
	excepted := ""
	if sum.Skip > 0 {
		excepted = fmt.Sprintf(", %d allowed by exceptions", sum.Skip)
	}
	_, err := fmt.Fprintf(w, "%d workloads audited: %d failures, %d warnings, %d errors%s\n", audited, sum.Fail, sum.Warn, sum.Error, excepted)
	return err
}

// clusterClaims are the cluster's ResourceClaimTemplates and
// ResourceClaims (in namespace, or every namespace when it is ""), so that
// the audit counts the GPUs of Pods' claims as the webhook does. A cluster
// that serves no resource.k8s.io/v1 has none.
func clusterClaims(ctx context.Context, c client.Client, namespace string) (*policyview.ClaimSet, error) {
	set := &policyview.ClaimSet{}
	var templates resourcev1.ResourceClaimTemplateList
	if err := c.List(ctx, &templates, client.InNamespace(namespace)); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return set, nil
		}
		return nil, fmt.Errorf("listing resource claim templates: %w", err)
	}
	for i := range templates.Items {
		set.AddTemplate(&templates.Items[i])
	}
	var claims resourcev1.ResourceClaimList
	if err := c.List(ctx, &claims, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing resource claims: %w", err)
	}
	for i := range claims.Items {
		set.AddClaim(&claims.Items[i])
	}
	return set, nil
}
