package offline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	"github.com/modelgate/modelgate/policies"
)

// DefaultNamespace is where objects that name no namespace are created.
const DefaultNamespace = "default"

// UserInfo is a requester as the API server describes an authenticated
// one: its groups and system:authenticated.
func UserInfo(name string, groups []string) authenticationv1.UserInfo {
	gs := slices.Clone(groups)
	if !slices.Contains(gs, "system:authenticated") {
		gs = append(gs, "system:authenticated")
	}
	return authenticationv1.UserInfo{Username: name, Groups: gs}
}

// Messages are the lines an outcome is judged by: the denial's lines when
// it is denied, else the warnings.
func (o *Outcome) Messages() []string {
	if o.Decision == Denied {
		return o.Denials
	}
	return o.Warnings
}

// Met reports whether the outcome is the one expected: the same decision
// and, for each of Messages and Warnings that is set, the same lines in
// any order.
func (e *Expect) Met(o *Outcome) bool {
	return o.Decision == e.Decision &&
		(e.Messages == nil || sameLines(e.Messages, o.Messages())) &&
		(e.Warnings == nil || sameLines(e.Warnings, o.Warnings))
}

// sameLines reports whether a and b hold the same lines, in any order.
func sameLines(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Case *Case
	// Err is set when the case could not be run: its object cannot be
	// read or the webhooks cannot judge it.
	Err error
	// Outcome is the webhooks' answer.
	Outcome Outcome
	// Passed reports whether the outcome met the expectation, and every
	// policy's CEL form decided as its Rego did, or failed closed where
	// the case says it does (Outcome.Disagreements).
	Passed bool
}

// Runner runs case files, loading each policy path and configuration once.
type Runner struct {
	setups map[[3]string]*setup
}

// setup is a configuration and the engine of a policy path, with the
// exceptions of it and of an exceptions path.
type setup struct {
	cfg        *config.Configuration
	engine     *policies.Engine
	cel        *CELForms
	exceptions []*policies.Exception
	err        error
}

// Run runs every case of a file. The error is for the file as a whole:
// its policies or configuration do not load.
func (r *Runner) Run(ctx context.Context, f *CaseFile) ([]CaseResult, error) {
	dir := filepath.Dir(f.path)
	s := r.setup(ctx, resolve(dir, f.Policies), resolve(dir, f.Config), resolve(dir, f.Exceptions))
	if s.err != nil {
		return nil, s.err
	}
	out := make([]CaseResult, 0, len(f.Cases))
	for i := range f.Cases {
		c := &f.Cases[i]
		res := CaseResult{Case: c}
		res.Outcome, res.Err = r.runCase(ctx, s, dir, f.Target, c)
		// A policy's Rego and CEL form must agree: the API server enforces
		// the one, modelgate the other.
		res.Passed = res.Err == nil && c.Expect.Met(&res.Outcome) && len(res.Outcome.Disagreements(c.Expect.CELFailsClosed...)) == 0
		out = append(out, res)
	}
	return out, nil
}

func (r *Runner) setup(ctx context.Context, policyPath, configPath, exceptionPath string) *setup {
	key := [3]string{policyPath, configPath, exceptionPath}
	if s, ok := r.setups[key]; ok {
		return s
	}
	s := &setup{cfg: config.New()}
	if configPath != "" {
		s.cfg, s.err = config.Load(configPath)
	}
	var cs []*policies.Compiled
	if s.err == nil && policyPath != "" {
		cs, s.cel, s.err = LoadPoliciesWithCEL(ctx, policyPath, s.cfg)
	}
	if s.err == nil {
		s.engine = NewEngine(s.cfg, cs)
		s.exceptions, s.err = caseExceptions(policyPath, exceptionPath, PolicyNames(cs))
	}
	if r.setups == nil {
		r.setups = map[[3]string]*setup{}
	}
	r.setups[key] = s
	return s
}

func (r *Runner) runCase(ctx context.Context, s *setup, dir string, defaults Target, c *Case) (Outcome, error) {
	t := defaults.With(c.Target)
	obj := []byte(c.Object)
	if c.File != "" {
		var err error
		if obj, err = readOneObject(resolve(dir, c.File)); err != nil {
			return Outcome{}, err
		}
	}
	ti, err := ReadTypeInfo(obj)
	if err != nil {
		return Outcome{}, err
	}
	ns := ti.Metadata.Namespace
	if ns == "" {
		ns = t.Namespace
	}
	var old []byte
	switch {
	case len(c.OldObject) > 0 && string(c.OldObject) != "null":
		old = []byte(c.OldObject)
	case c.OldFile != "":
		if old, err = readOneObject(resolve(dir, c.OldFile)); err != nil {
			return Outcome{}, err
		}
	}
	var now func() time.Time
	if t.Now != nil {
		at := t.Now.Time
		now = func() time.Time { return at }
	}
	es := make([]*policies.Exception, 0, len(s.exceptions))
	for _, e := range s.exceptions {
		if e.Namespace == "" {
			e2 := *e
			e2.Namespace = ns
			e = &e2
		}
		es = append(es, e)
	}
	UseExceptions(s.engine, s.cfg, es, now)
	a, err := NewAdmitter(s.cfg, s.engine, Namespaces{Default: t.NamespaceLabels})
	if err != nil {
		return Outcome{}, err
	}
	a.SetCEL(s.cel)
	return a.Admit(ctx, Request{Object: obj, OldObject: old, Namespace: ns, User: UserInfo(t.User, t.Groups)})
}

// caseExceptions are the exceptions of a case file: those among the
// WorkloadPolicy objects of policyPath and those of exceptionPath, with no
// namespace when they name none (each case gives its own).
func caseExceptions(policyPath, exceptionPath string, exists func(source, name string) bool) ([]*policies.Exception, error) {
	out, err := PolicyPathExceptions(policyPath, "", exists)
	if exceptionPath == "" {
		return out, err
	}
	es, eerr := LoadExceptions(exceptionPath, "", exists)
	return append(out, es...), errors.Join(err, eerr)
}

// isPolicyDir reports whether path is a directory of .rego policies,
// whose .yaml files are policy settings.
func isPolicyDir(path string) bool {
	m, _ := filepath.Glob(filepath.Join(path, "*.rego"))
	return len(m) > 0
}

// With returns t with the settings o sets replacing its own, and the
// defaults filled in: a case's target over its file's, as Runner takes
// them.
func (t Target) With(o Target) Target {
	if o.Namespace != "" {
		t.Namespace = o.Namespace
	}
	if o.NamespaceLabels != nil {
		t.NamespaceLabels = o.NamespaceLabels
	}
	if o.User != "" {
		t.User = o.User
	}
	if o.Groups != nil {
		t.Groups = o.Groups
	}
	if o.Now != nil {
		t.Now = o.Now
	}
	if t.Namespace == "" {
		t.Namespace = DefaultNamespace
	}
	if t.User == "" {
		t.User = DefaultTestUser
	}
	return t
}

// readOneObject reads a YAML file that must hold exactly one object.
func readOneObject(path string) ([]byte, error) {
	data, err := os.ReadFile(path) //nolint:gosec // a path from the user's own case file.
	if err != nil {
		return nil, err
	}
	docs, err := SplitDocuments(path, data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: holds %d objects; a case's file must hold exactly one", path, len(docs))
	}
	return docs[0].JSON, nil
}

// resolve makes a path from a case file relative to the file's directory;
// empty stays empty.
func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
