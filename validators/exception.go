package validators

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
)

// ExceptionOf converts a WorkloadPolicyException into the engine's form.
// The error names the field that cannot be used (a label selector that
// does not parse).
func ExceptionOf(ex *policyv1.WorkloadPolicyException) (*policies.Exception, error) {
	out := &policies.Exception{
		Namespace: ex.Namespace,
		Name:      ex.Name,
		Source:    SourceOf(ex.Spec.PolicySource),
		Policies:  slices.Clone(ex.Spec.Policies),
		Kinds:     slices.Clone(ex.Spec.Match.Kinds),
		Names:     slices.Clone(ex.Spec.Match.Names),
		ExpiresAt: ex.Spec.ExpiresAt.Time,
		Reason:    ex.Spec.Reason,
		Ticket:    ex.Spec.Ticket,
	}
	if ls := ex.Spec.Match.LabelSelector; ls != nil {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, fmt.Errorf("spec.match.labelSelector: %w", err)
		}
		out.Selector = sel
	}
	return out, nil
}

// SourceOf is the engine's source (policies.Policy.Source) of the policies
// an exception's spec.policySource names: SourceWorkloadPolicy when it is
// unset. A value the API does not accept is returned as it is, and so
// names no policy.
func SourceOf(s policyv1.PolicySource) string {
	switch s {
	case "", policyv1.PolicySourceWorkloadPolicy:
		return SourceWorkloadPolicy
	case policyv1.PolicySourceDirectory:
		return policies.SourceDirectory
	}
	return string(s)
}

// ExceptionRules are what an exception is checked against when it is
// written.
type ExceptionRules struct {
	// Now is the time of the write.
	Now time.Time
	// MaxDuration is how far ahead of Now expiresAt may be.
	MaxDuration time.Duration
	// ClockSkew is policy.exceptions.clockSkew: an exception stops
	// applying that long before its expiresAt (policies.NewExceptions), so
	// expiresAt must be more than that ahead of Now for it to ever apply.
	ClockSkew time.Duration
	// PolicyExists reports whether the policy of that source
	// (policies.Policy.Source) and name is in force; every policy is when
	// nil.
	PolicyExists func(source, name string) bool
	// Policy returns the match settings of the named WorkloadPolicy, for
	// the warning about a match that selects nothing; nil when unknown.
	Policy func(name string) *policyv1.WorkloadMatch
}

// ValidateException checks an exception being created, or updated from
// old (nil on create): every problem names its field. An update that
// leaves expiresAt as it was is not held to the maximum again, so that an
// exception can still be edited (its reason, or to end it earlier) after
// the maximum was lowered. The warnings are for a match that can select
// no workload the policies judge.
func ValidateException(ex, old *policyv1.WorkloadPolicyException, r ExceptionRules) (field.ErrorList, []string) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if len(ex.Spec.Policies) == 0 {
		errs = append(errs, field.Required(spec.Child("policies"), "name at least one WorkloadPolicy"))
	}
	source := SourceOf(ex.Spec.PolicySource)
	switch ex.Spec.PolicySource {
	case "", policyv1.PolicySourceWorkloadPolicy, policyv1.PolicySourceDirectory:
		for i, p := range ex.Spec.Policies {
			if err := namedPolicy(spec.Child("policies").Index(i), source, p, r.PolicyExists); err != nil {
				errs = append(errs, err)
			}
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("policySource"), ex.Spec.PolicySource,
			[]policyv1.PolicySource{policyv1.PolicySourceWorkloadPolicy, policyv1.PolicySourceDirectory}))
	}
	if strings.TrimSpace(ex.Spec.Reason) == "" {
		errs = append(errs, field.Required(spec.Child("reason"), "say why the workloads may break the policies"))
	}
	exp := ex.Spec.ExpiresAt.Time
	changed := old == nil || !old.Spec.ExpiresAt.Equal(&ex.Spec.ExpiresAt)
	switch {
	case exp.IsZero():
		errs = append(errs, field.Required(spec.Child("expiresAt"), "an exception must expire (RFC 3339, e.g. 2026-12-04T18:00:00Z)"))
	case changed && !r.Now.Add(max(r.ClockSkew, 0)).Before(exp):
		// It would never apply: policies.Exceptions.InForce.
		errs = append(errs, field.Invalid(spec.Child("expiresAt"), exp.UTC().Format(time.RFC3339), inTheFuture(r.Now, r.ClockSkew)))
	case changed && r.MaxDuration > 0 && exp.Sub(r.Now) > r.MaxDuration:
		errs = append(errs, field.Invalid(spec.Child("expiresAt"), exp.UTC().Format(time.RFC3339),
			fmt.Sprintf("must be at most %s ahead (policy.exceptions.maxDuration), that is no later than %s",
				shortDuration(r.MaxDuration), r.Now.Add(r.MaxDuration).UTC().Format(time.RFC3339))))
	}
	if ls := ex.Spec.Match.LabelSelector; ls != nil {
		if _, err := metav1.LabelSelectorAsSelector(ls); err != nil {
			errs = append(errs, field.Invalid(spec.Child("match", "labelSelector"), ls.String(), err.Error()))
		}
	}
	for i, n := range ex.Spec.Match.Names {
		if n == "" {
			errs = append(errs, field.Invalid(spec.Child("match", "names").Index(i), n, "must not be empty"))
		}
	}
	if len(errs) > 0 || r.Policy == nil || source != SourceWorkloadPolicy {
		return errs, nil
	}
	return nil, selectsNothing(ex, r.Policy)
}

// namedPolicy checks one name of spec.policies: no wildcard, and a policy
// of the exception's source in force. A name only the other source has is
// told so, with the spec.policySource that would name it.
func namedPolicy(path *field.Path, source, name string, exists func(source, name string) bool) *field.Error {
	switch {
	case strings.ContainsAny(name, "*?"):
		return field.Invalid(path, name, "must name a policy exactly: there is no wildcard")
	case exists == nil || exists(source, name):
		return nil
	case source == SourceWorkloadPolicy && exists(policies.SourceDirectory, name):
		return field.Invalid(path, name, "no WorkloadPolicy of this name is in force, only a policy of the policy directory: "+
			"set spec.policySource: Directory to lift the directory policy's denials")
	case source == policies.SourceDirectory && exists(SourceWorkloadPolicy, name):
		return field.Invalid(path, name, "no policy of the policy directory (spec.policySource: Directory) has this name, only a WorkloadPolicy: "+
			"leave spec.policySource unset to lift the WorkloadPolicy's denials")
	}
	return field.NotFound(path, name)
}

// inTheFuture is the rule expiresAt breaks: more than the clock skew ahead
// of now.
func inTheFuture(now time.Time, skew time.Duration) string {
	at := now.UTC().Format(time.RFC3339)
	if skew <= 0 {
		return fmt.Sprintf("must be in the future (now is %s)", at)
	}
	return fmt.Sprintf("must be more than %s (policy.exceptions.clockSkew) in the future (now is %s)", skew, at)
}

// selectsNothing warns about each policy the exception names that can
// never judge what it matches: kinds it does not apply to, or a namespace
// its match leaves out.
func selectsNothing(ex *policyv1.WorkloadPolicyException, policy func(string) *policyv1.WorkloadMatch) []string {
	var out []string
	for _, name := range ex.Spec.Policies {
		m := policy(name)
		if m == nil {
			continue
		}
		if len(m.Kinds) > 0 && len(ex.Spec.Match.Kinds) > 0 && !slices.ContainsFunc(ex.Spec.Match.Kinds, func(k string) bool { return slices.Contains(m.Kinds, k) }) {
			out = append(out, fmt.Sprintf("spec.match.kinds %v: WorkloadPolicy %s applies only to %v, so this exception lifts none of its denials",
				ex.Spec.Match.Kinds, name, m.Kinds))
		}
		if slices.Contains(m.ExcludedNamespaces, ex.Namespace) ||
			len(m.Namespaces) > 0 && !slices.Contains(m.Namespaces, ex.Namespace) {
			out = append(out, fmt.Sprintf("WorkloadPolicy %s does not apply in namespace %s (its spec.match), so this exception lifts none of its denials",
				name, ex.Namespace))
		}
	}
	return out
}

// shortDuration renders 2160h as "90 days" and other durations as Go does.
func shortDuration(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// cronJobSuffix is the "-<minutes since the epoch>" a CronJob adds to the
// name of each Job it makes.
var cronJobSuffix = regexp.MustCompile(`-[0-9]{8,}$`)

// SubjectOf is what exceptions match a workload by: its kind and name, and
// for an object a controller made, the kind and name of the workload it
// belongs to (a Pod's Deployment through its ReplicaSet and the
// pod-template-hash label, its StatefulSet, its Job and that Job's
// CronJob; a Job's CronJob); its labels, then its pod template's.
func SubjectOf(kind, namespace string, obj, podMeta *metav1.ObjectMeta) policies.Subject {
	s := policies.Subject{Namespace: namespace, Identities: []policies.Identity{{Kind: kind, Name: obj.Name}}}
	s.Labels = append(s.Labels, obj.Labels)
	if podMeta != nil && podMeta != obj {
		s.Labels = append(s.Labels, podMeta.Labels)
	}
	c := metav1.GetControllerOfNoCopy(obj)
	if c == nil {
		return s
	}
	switch {
	case kind == "Pod" && c.Kind == "ReplicaSet":
		if h := obj.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(c.Name, "-"+h) {
			s.Identities = append(s.Identities, policies.Identity{Kind: "Deployment", Name: strings.TrimSuffix(c.Name, "-"+h)})
		}
	case kind == "Pod" && c.Kind == "StatefulSet":
		s.Identities = append(s.Identities, policies.Identity{Kind: "StatefulSet", Name: c.Name})
	case kind == "Pod" && c.Kind == "Job":
		s.Identities = append(s.Identities, policies.Identity{Kind: "Job", Name: c.Name})
		if loc := cronJobSuffix.FindStringIndex(c.Name); loc != nil {
			s.Identities = append(s.Identities, policies.Identity{Kind: "CronJob", Name: c.Name[:loc[0]]})
		}
	case kind == "Job" && c.Kind == "CronJob":
		s.Identities = append(s.Identities, policies.Identity{Kind: "CronJob", Name: c.Name})
	}
	return s
}
