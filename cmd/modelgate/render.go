package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/modelgate/modelgate/api/annotations"
	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/internal/seal"
	"github.com/modelgate/modelgate/offline"
	"github.com/modelgate/modelgate/policies"
)

// defaultRenderUser is the requester of rendered objects when --user is
// not given; the owner-metadata mutator stamps it as modelgate.io/owner.
const defaultRenderUser = "modelgate-render"

const renderUsage = `Usage: modelgate render -f FILE [-f FILE...] [flags]

Runs manifests through modelgate's mutating and validating webhooks, with
the webhook's own code, without a cluster. Pods, Deployments, StatefulSets,
Jobs and CronJobs are admitted as a CREATE: mutated, then judged by the
policies. AIInferences, in any version, are converted to v1, defaulted,
validated and judged by the policies, and printed as the v1 object the API
server would store. Other objects pass through unchanged, with a warning
when they carry modelgate.io/ annotations, which do nothing to them. The
objects (mutated where modelgate changed them) are printed on stdout, one
decision per object on stderr. Exit status: 0 when every object is allowed
(warnings included), 1 when one is denied, 2 on an error.

Flags:
`

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// renderFlags are the render subcommand's flags.
type renderFlags struct {
	files           stringList
	policies        string
	configFile      string
	namespace       string
	namespaceLabels string
	user            string
	groups          string
	recordKey       string
}

func (f *renderFlags) bind(fs *flag.FlagSet) {
	fs.Var(&f.files, "f", "manifest `FILE`, or a directory of .yaml, .yml and .json files (multi-document YAML; \"-\" is stdin); repeatable")
	fs.StringVar(&f.recordKey, "record-key", "", "`FILE` holding the record key that sealed what the manifests carry (the Secret modelgate-record-key's data.key, base64-decoded, or a key of your own for render's output): the injection records it sealed are modelgate's, so rendering rendered output again changes nothing; without it render seals with a key of its own run")
	fs.StringVar(&f.policies, "policies", "", "policy directory (.rego files, as --policy-dir), or a directory or file of WorkloadPolicy objects at `PATH`")
	fs.StringVar(&f.configFile, "config", "", "Configuration `FILE` (config.modelgate.io/v1alpha1), as modelgate serve --config reads it")
	fs.StringVar(&f.namespace, "namespace", offline.DefaultNamespace, "namespace of objects whose metadata names none")
	fs.StringVar(&f.namespaceLabels, "namespace-labels", "", "`labels` of the namespaces, k=v,...; kubernetes.io/metadata.name is added, and a Namespace object among the manifests gives its own labels instead")
	fs.StringVar(&f.user, "user", defaultRenderUser, "requester's user name (stamped as the modelgate.io/owner label)")
	fs.StringVar(&f.groups, "groups", "", "requester's `groups`, g1,g2,...; system:authenticated is added")
}

func render(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("modelgate render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, renderUsage)
		fs.PrintDefaults()
	}
	var f renderFlags
	f.bind(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "modelgate render: %s\n", indentRest(err.Error(), "  "))
		return 2
	}
	labels, err := f.check(fs)
	if err != nil {
		return fail(err)
	}
	ctx := logr.NewContext(context.Background(), logr.Discard())

	cfg := config.New()
	if f.configFile != "" {
		if cfg, err = config.Load(f.configFile); err != nil {
			return fail(err)
		}
	}
	if f.recordKey != "" {
		b, err := os.ReadFile(f.recordKey)
		if err != nil {
			return fail(fmt.Errorf("--record-key: %w", err))
		}
		if cfg.RecordKey, err = seal.New(b); err != nil {
			return fail(fmt.Errorf("--record-key %s: %w", f.recordKey, err))
		}
	}
	var (
		cs  []*policies.Compiled
		cel *offline.CELForms
	)
	if f.policies != "" {
		cs, cel, err = offline.LoadPoliciesWithCEL(ctx, f.policies, cfg)
		switch {
		case errors.Is(err, offline.ErrCELForms):
			return fail(err)
		case err != nil:
			return fail(fmt.Errorf("policies do not load:\n%w", err))
		}
	}
	docs, err := readManifests(f.files, stdin)
	if err != nil {
		return fail(fmt.Errorf("the manifests cannot be read:\n%w", err))
	}
	ns := offline.Namespaces{Default: labels, ByName: namespaceObjects(docs)}
	engine := offline.NewEngine(cfg, cs)
	if err := useExceptions(engine, cfg, cs, f.policies, docs, f.namespace); err != nil {
		return fail(fmt.Errorf("exceptions do not load:\n%w", err))
	}
	admitter, err := offline.NewAdmitter(cfg, engine, ns)
	if err != nil {
		return fail(err)
	}
	claims, err := offline.ClaimsIn(docs, f.namespace)
	if err != nil {
		return fail(err)
	}
	admitter.SetClaims(claims)
	admitter.SetCEL(cel)
	r := &renderer{
		admitter:  admitter,
		namespace: f.namespace,
		user:      offline.UserInfo(f.user, splitList(f.groups)),
		decisions: stderr,
		keyed:     f.recordKey != "",
	}
	var out [][]byte
	for i := range docs {
		y, err := r.renderDocument(ctx, &docs[i])
		if err != nil {
			r.errs = append(r.errs, err)
			continue
		}
		out = append(out, y)
	}
	if len(r.errs) > 0 {
		for _, err := range r.errs {
			fmt.Fprintf(stderr, "modelgate render: %s\n", indentRest(err.Error(), "  "))
		}
		return 2
	}
	if _, err := stdout.Write(bytes.Join(out, []byte("---\n"))); err != nil {
		return fail(err)
	}
	if r.denied || r.disagreed {
		return 1
	}
	return 0
}

// check validates the flags and parses the namespace labels.
func (f *renderFlags) check(fs *flag.FlagSet) (map[string]string, error) {
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q; manifests are given with -f", fs.Args())
	}
	if len(f.files) == 0 {
		return nil, errors.New("no manifests: give at least one -f FILE (-f - reads stdin)")
	}
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return nil, fmt.Errorf("--namespace %q: %s", f.namespace, strings.Join(errs, "; "))
	}
	if f.user == "" {
		return nil, errors.New("--user must not be empty")
	}
	labels, err := offline.ParseLabels(f.namespaceLabels)
	if err != nil {
		return nil, fmt.Errorf("--namespace-labels: %w", err)
	}
	return labels, nil
}

// renderer admits the documents and reports the decisions.
type renderer struct {
	admitter  *offline.Admitter
	namespace string
	user      authenticationv1.UserInfo
	decisions io.Writer
	denied    bool
	// disagreed says a policy's CEL form decided an object otherwise than
	// its Rego: the API server would enforce the one, modelgate the other.
	disagreed bool
	errs      []error
	// keyed says --record-key was given; without it, a sealed record in
	// the input was sealed by another key than this run's, which render
	// warns about.
	keyed bool
}

// renderDocument admits one document, or each item of a v1 List, and
// returns its YAML: as written when nothing changed, else the mutated
// object.
func (r *renderer) renderDocument(ctx context.Context, d *offline.Document) ([]byte, error) {
	ti, err := offline.ReadTypeInfo(d.JSON)
	if err != nil {
		return nil, &offline.DocumentError{Doc: d, Err: err}
	}
	if ti.APIVersion == "v1" && ti.Kind == "List" {
		return r.renderList(ctx, d)
	}
	obj, mutated, err := r.admit(ctx, d.JSON, ti)
	if err != nil {
		return nil, &offline.DocumentError{Doc: d, Err: err}
	}
	if !mutated {
		return d.Text, nil
	}
	return toYAML(obj)
}

// renderList admits every item of a v1 List.
func (r *renderer) renderList(ctx context.Context, d *offline.Document) ([]byte, error) {
	var list map[string]json.RawMessage
	var items []json.RawMessage
	if err := json.Unmarshal(d.JSON, &list); err != nil {
		return nil, &offline.DocumentError{Doc: d, Err: err}
	}
	if err := json.Unmarshal(list["items"], &items); list["items"] != nil && err != nil {
		return nil, &offline.DocumentError{Doc: d, Err: fmt.Errorf("items: %w", err)}
	}
	changed := false
	for i, item := range items {
		ti, err := offline.ReadTypeInfo(item)
		if err != nil {
			return nil, &offline.DocumentError{Doc: d, Err: fmt.Errorf("items[%d]: %w", i, err)}
		}
		obj, mutated, err := r.admit(ctx, item, ti)
		if err != nil {
			return nil, &offline.DocumentError{Doc: d, Err: fmt.Errorf("items[%d]: %w", i, err)}
		}
		items[i], changed = obj, changed || mutated
	}
	if !changed {
		return d.Text, nil
	}
	js, err := json.Marshal(items)
	if err != nil {
		return nil, err
	}
	list["items"] = js
	if js, err = json.Marshal(list); err != nil {
		return nil, err
	}
	return toYAML(js)
}

// admit runs one object through the webhooks and prints its decision.
func (r *renderer) admit(ctx context.Context, obj []byte, ti offline.TypeInfo) ([]byte, bool, error) {
	ns := ti.Metadata.Namespace
	if ns == "" {
		ns = r.namespace
	}
	name := ti.DisplayName()
	if offline.Handles(ti.APIVersion, ti.Kind) || ti.Metadata.Namespace != "" {
		name = ns + "/" + name
	}
	out, err := r.admitter.Admit(ctx, offline.Request{Object: obj, Namespace: ns, User: r.user})
	if err != nil {
		return nil, false, fmt.Errorf("%s %s: %w", ti.Kind, name, err)
	}
	if out.Decision == offline.Denied {
		r.denied = true
	}
	writeDecision(r.decisions, ti.Kind+" "+name, &out)
	for _, d := range out.Disagreements() {
		r.disagreed = true
		fmt.Fprintf(r.decisions, "  error: %s\n", d)
	}
	if !r.keyed && offline.Handles(ti.APIVersion, ti.Kind) && carriesSeal(obj) {
		fmt.Fprintf(r.decisions, "  warning: its injection record (%s) was sealed by another key than this run's (an earlier render, "+
			"or a cluster's modelgate): it is not taken as modelgate's, and what it records is not reverted or kept as injected; "+
			"pass --record-key FILE with the key that sealed it to render it as that modelgate would\n", annotations.Injected)
	}
	if !offline.Handles(ti.APIVersion, ti.Kind) {
		writeUnhandledAnnotations(r.decisions, &ti, modelgateAnnotations(obj))
	}
	return out.Object, out.Mutated, nil
}

// writeDecision prints "Kind ns/name: decision" and the messages below it,
// indented: a denial's lines, then warnings ("warning: " before them when
// the object is denied).
func writeDecision(w io.Writer, what string, o *offline.Outcome) {
	head := what + ": " + string(o.Decision)
	if o.Skipped != "" {
		head += " (" + o.Skipped + ")"
	}
	fmt.Fprintln(w, head)
	for _, l := range o.Denials {
		fmt.Fprintln(w, "  "+l)
	}
	for _, l := range o.Warnings {
		if o.Decision == offline.Denied {
			l = "warning: " + l
		}
		fmt.Fprintln(w, "  "+l)
	}
	if o.CEL == nil || len(o.CEL.Denials)+len(o.CEL.Warnings) == 0 {
		return
	}
	// What the CEL forms say, as the API server would enforce them.
	cel := offline.Warned
	if len(o.CEL.Denials) > 0 {
		cel = offline.Denied
	}
	fmt.Fprintf(w, "  cel: %s\n", cel)
	for _, l := range o.CEL.Denials {
		fmt.Fprintln(w, "    "+l)
	}
	for _, l := range o.CEL.Warnings {
		fmt.Fprintln(w, "    warning: "+l)
	}
}

// readManifests reads every -f argument: files, directories (their .yaml,
// .yml and .json files, not recursing) and "-" for stdin, and splits them
// into documents. Every unreadable file and undecodable document is
// reported.
func readManifests(args []string, stdin io.Reader) ([]offline.Document, error) {
	var (
		docs      []offline.Document
		errs      []error
		readStdin bool
	)
	add := func(name string, data []byte) {
		ds, err := offline.SplitDocuments(name, data)
		docs = append(docs, ds...)
		errs = append(errs, offline.Unjoin(err)...)
		for i := range ds {
			if _, err := offline.ReadTypeInfo(ds[i].JSON); err != nil {
				errs = append(errs, &offline.DocumentError{Doc: &ds[i], Err: err})
			}
		}
	}
	for _, arg := range args {
		if arg == "-" {
			if readStdin {
				errs = append(errs, errors.New(`-f -: stdin can be read only once`))
				continue
			}
			readStdin = true
			data, err := io.ReadAll(stdin)
			if err != nil {
				errs = append(errs, fmt.Errorf("reading stdin: %w", err))
				continue
			}
			add("stdin", data)
			continue
		}
		files, err := manifestFiles(arg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, file := range files {
			data, err := os.ReadFile(file) //nolint:gosec // the user's own -f argument.
			if err != nil {
				errs = append(errs, err)
				continue
			}
			add(file, data)
		}
	}
	return docs, errors.Join(errs...)
}

// manifestFiles is the file itself, or a directory's manifest files in
// name order.
func manifestFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				out = append(out, filepath.Join(path, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", path)
	}
	return out, nil
}

// namespaceObjects are the labels of the Namespace objects among the
// documents, by name.
func namespaceObjects(docs []offline.Document) map[string]map[string]string {
	out := map[string]map[string]string{}
	for i := range docs {
		ti, err := offline.ReadTypeInfo(docs[i].JSON)
		if err != nil || ti.APIVersion != "v1" || ti.Kind != "Namespace" {
			continue
		}
		out[ti.Metadata.Name] = ti.Metadata.Labels
	}
	return out
}

// toYAML converts an object to YAML.
func toYAML(js []byte) ([]byte, error) {
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return nil, fmt.Errorf("writing YAML: %w", err)
	}
	return y, nil
}

// splitList splits "a,b" into its non-empty, trimmed parts.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if p := strings.TrimSpace(part); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// indentRest indents every line of s but the first.
func indentRest(s, indent string) string {
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

// carriesSeal reports whether an object holds modelgate.io/seal in any of
// its metadata (its own, a template's): a record an earlier modelgate, or
// render, sealed.
func carriesSeal(obj []byte) bool {
	for _, site := range modelgateAnnotations(obj) {
		if slices.Contains(site.Keys, annotations.Seal) {
			return true
		}
	}
	return false
}

// useExceptions applies the WorkloadPolicyExceptions of the policies path
// and of the manifests, as the cluster applies its own: judged at the
// local clock, each expired one applying nowhere.
func useExceptions(e *policies.Engine, cfg *config.Configuration, cs []*policies.Compiled, policyPath string, docs []offline.Document, defaultNS string) error {
	exists := offline.PolicyNames(cs)
	es, err := offline.PolicyPathExceptions(policyPath, defaultNS, exists)
	found, ferr := offline.ExceptionsIn(docs, defaultNS, exists)
	offline.UseExceptions(e, cfg, append(es, found...), nil)
	return errors.Join(err, ferr)
}
