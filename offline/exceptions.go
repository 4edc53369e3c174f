package offline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/selection"
	kjson "sigs.k8s.io/json"

	config "github.com/modelgate/modelgate/api/config/v1alpha1"
	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/validators"
)

// ExceptionsIn decodes the WorkloadPolicyException objects among docs (the
// other kinds are left alone), in namespace defaultNS when they name none.
// Each is checked as the webhook checks one at apply, but for its expiry:
// an exception that has expired is kept, and applies nowhere, as in the
// cluster. policyExists, when not nil, reports whether the policy of that
// source and name was loaded.
func ExceptionsIn(docs []Document, defaultNS string, policyExists func(source, name string) bool) ([]*policies.Exception, error) {
	var out []*policies.Exception
	var errs []error
	for i := range docs {
		d := &docs[i]
		ti, err := ReadTypeInfo(d.JSON)
		if err != nil || !IsException(ti) {
			continue // not an exception; the caller reports what it must
		}
		e, err := exceptionDocument(d, defaultNS, policyExists)
		if err != nil {
			errs = append(errs, &DocumentError{Doc: d, Err: err})
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// IsException reports whether the type is a WorkloadPolicyException.
func IsException(ti TypeInfo) bool {
	group, _, _ := strings.Cut(ti.APIVersion, "/")
	return ti.Kind == "WorkloadPolicyException" && group == policyv1.GroupVersion.Group
}

func exceptionDocument(d *Document, defaultNS string, policyExists func(source, name string) bool) (*policies.Exception, error) {
	ex := &policyv1.WorkloadPolicyException{}
	strict, err := kjson.UnmarshalStrict(d.JSON, ex)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, fmt.Errorf("WorkloadPolicyException: %w", err)
	}
	if ex.APIVersion != policyv1.GroupVersion.String() {
		return nil, fmt.Errorf("WorkloadPolicyException %s: only %s is supported", ex.APIVersion, policyv1.GroupVersion)
	}
	if ex.Namespace == "" {
		ex.Namespace = defaultNS
	}
	// Judged as an exception already stored: its expiresAt is not held to
	// "in the future" (old is itself).
	errs, _ := validators.ValidateException(ex, ex, validators.ExceptionRules{PolicyExists: policyExists})
	if len(errs) > 0 {
		return nil, fmt.Errorf("WorkloadPolicyException %s/%s: %w", ex.Namespace, ex.Name, errs.ToAggregate())
	}
	return validators.ExceptionOf(ex)
}

// LoadExceptions reads the WorkloadPolicyException objects of the YAML
// files at path (a file, or a directory's .yaml and .yml files, not its
// subdirectories); none when path is empty.
func LoadExceptions(path, defaultNS string, policyExists func(source, name string) bool) ([]*policies.Exception, error) {
	if path == "" {
		return nil, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("exceptions: %w", err)
	}
	files := []string{path}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("exceptions: %w", err)
		}
		files = files[:0]
		for _, e := range entries {
			if name := e.Name(); !e.IsDir() && !strings.HasPrefix(name, ".") && isYAML(name) && !isKustomization(name) {
				files = append(files, filepath.Join(path, name))
			}
		}
	}
	var out []*policies.Exception
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f) //nolint:gosec // the path is the user's own argument.
		if err != nil {
			errs = append(errs, err)
			continue
		}
		docs, err := SplitDocuments(f, data)
		errs = append(errs, Unjoin(err)...)
		es, err := ExceptionsIn(docs, defaultNS, policyExists)
		errs = append(errs, Unjoin(err)...)
		out = append(out, es...)
	}
	return out, errors.Join(errs...)
}

// PolicyPathExceptions are the WorkloadPolicyExceptions among the objects
// of a policy path (a file or directory of WorkloadPolicy objects, as
// LoadPolicies reads it); none for an empty path or a directory of .rego
// policies, whose YAML files are settings, not objects.
func PolicyPathExceptions(policyPath, defaultNS string, exists func(source, name string) bool) ([]*policies.Exception, error) {
	if policyPath == "" || isPolicyDir(policyPath) {
		return nil, nil
	}
	return LoadExceptions(policyPath, defaultNS, exists)
}

// UseExceptions makes es the exceptions e applies, under the
// Configuration's clock skew, judged at now (the local clock when nil).
func UseExceptions(e *policies.Engine, cfg *config.Configuration, es []*policies.Exception, now func() time.Time) {
	skew := config.DefaultExceptionClockSkew
	if d := cfg.Policy.Exceptions.ClockSkew; d != nil {
		skew = d.Duration
	}
	x := policies.NewExceptions(skew, es...)
	if now != nil {
		x = x.WithClock(now)
	}
	e.SetExceptions(x)
}

// PolicyNames reports whether the policy of that source and name is among
// cs; nil (every policy accepted) when cs is empty: without policies an
// exception lifts nothing, and a manifest that carries one is still
// rendered.
func PolicyNames(cs []*policies.Compiled) func(source, name string) bool {
	if len(cs) == 0 {
		return nil
	}
	loaded := map[[2]string]bool{}
	for _, c := range cs {
		loaded[[2]string{c.Source(), c.Name()}] = true
	}
	return func(source, name string) bool { return loaded[[2]string{source, name}] }
}

// exceptionsInForce are the exceptions of x in force at its clock
// (Exceptions.Now, Exceptions.InForce), as the WorkloadPolicyExceptions
// they were read from, for the CEL forms (celform.Scope.Exceptions).
func exceptionsInForce(x *policies.Exceptions) []policyv1.WorkloadPolicyException {
	now := x.Now()
	var out []policyv1.WorkloadPolicyException
	for _, e := range x.All() {
		if x.InForce(e, now) {
			if ex, ok := exceptionObject(e); ok {
				out = append(out, ex)
			}
		}
	}
	return out
}

// exceptionObject is e as the WorkloadPolicyException it was read from
// (validators.ExceptionOf): its label selector made again of the
// requirements it was parsed into (matchLabels the equalities). false for
// a requirement no label selector gives: the exception then applies
// nowhere in the CEL forms.
func exceptionObject(e *policies.Exception) (policyv1.WorkloadPolicyException, bool) {
	ex := policyv1.WorkloadPolicyException{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.GroupVersion.String(), Kind: "WorkloadPolicyException"},
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Spec: policyv1.WorkloadPolicyExceptionSpec{
			Policies:  slices.Clone(e.Policies),
			Match:     policyv1.ExceptionMatch{Kinds: slices.Clone(e.Kinds), Names: slices.Clone(e.Names)},
			ExpiresAt: metav1.NewTime(e.ExpiresAt),
			Reason:    e.Reason,
			Ticket:    e.Ticket,
		},
	}
	switch e.Source {
	case validators.SourceWorkloadPolicy:
		ex.Spec.PolicySource = policyv1.PolicySourceWorkloadPolicy
	case policies.SourceDirectory:
		ex.Spec.PolicySource = policyv1.PolicySourceDirectory
	default:
		ex.Spec.PolicySource = policyv1.PolicySource(e.Source)
	}
	if e.Selector == nil {
		return ex, true
	}
	reqs, _ := e.Selector.Requirements()
	ls := &metav1.LabelSelector{}
	for _, r := range reqs {
		if v := r.ValuesUnsorted(); (r.Operator() == selection.Equals || r.Operator() == selection.DoubleEquals) && len(v) == 1 {
			if ls.MatchLabels == nil {
				ls.MatchLabels = map[string]string{}
			}
			ls.MatchLabels[r.Key()] = v[0]
			continue
		}
		op, ok := selectorOps[r.Operator()]
		if !ok {
			return ex, false
		}
		var values []string
		if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
			values = slices.Sorted(slices.Values(r.ValuesUnsorted()))
		}
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: values})
	}
	ex.Spec.Match.LabelSelector = ls
	return ex, true
}

// selectorOps are the label selector operators of the requirements a
// label selector is parsed into.
var selectorOps = map[selection.Operator]metav1.LabelSelectorOperator{
	selection.Equals: metav1.LabelSelectorOpIn, selection.DoubleEquals: metav1.LabelSelectorOpIn, selection.In: metav1.LabelSelectorOpIn,
	selection.NotEquals: metav1.LabelSelectorOpNotIn, selection.NotIn: metav1.LabelSelectorOpNotIn,
	selection.Exists: metav1.LabelSelectorOpExists, selection.DoesNotExist: metav1.LabelSelectorOpDoesNotExist,
}
