package policies

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Exception lets the workloads of its namespace that it matches break the
// named policies until it expires (a WorkloadPolicyException): a deny
// message it covers moves out of Result.Deny into Result.Excepted, and is
// shown as a warning that names the exception, its ticket and its expiry.
type Exception struct {
	// Namespace and Name identify the exception; it covers workloads of
	// Namespace only.
	Namespace, Name string
	// Source and Policies are the source (Policy.Source) and the names of
	// the policies whose deny messages it lifts: a policy of another
	// source lifts nothing, whatever its name.
	Source   string
	Policies []string
	// Kinds and Names select workloads by kind and name, every one when
	// empty; Selector by labels, every one when nil.
	Kinds, Names []string
	Selector     labels.Selector
	// ExpiresAt is when it stops applying (see Exceptions.InForce).
	ExpiresAt time.Time
	// Reason and Ticket are shown with the warnings.
	Reason, Ticket string
}

// Ref names the exception: namespace/name.
func (e *Exception) Ref() string { return e.Namespace + "/" + e.Name }

// Subject is what an exception matches a workload by.
type Subject struct {
	Namespace string
	// Identities are the workload's kind and name, then those of the
	// workload that made it (a Deployment for a Pod of its ReplicaSet), so
	// that an exception for a Deployment covers the Pods it makes.
	Identities []Identity
	// Labels are the workload's labels, then its pod template's.
	Labels []map[string]string
}

// Identity is a workload's kind and name.
type Identity struct{ Kind, Name string }

// matches reports whether e covers s, expiry aside.
func (e *Exception) matches(s *Subject) bool {
	if e.Namespace != s.Namespace {
		return false
	}
	identity := slices.ContainsFunc(s.Identities, func(id Identity) bool {
		return (len(e.Kinds) == 0 || slices.Contains(e.Kinds, id.Kind)) &&
			(len(e.Names) == 0 || slices.Contains(e.Names, id.Name))
	})
	if !identity {
		return false
	}
	if e.Selector == nil || e.Selector.Empty() {
		return true
	}
	return slices.ContainsFunc(s.Labels, func(l map[string]string) bool {
		return e.Selector.Matches(labels.Set(l))
	})
}

// names reports whether e names the policy of that source and name.
func (e *Exception) names(source, name string) bool {
	return e.Source == source && slices.Contains(e.Policies, name)
}

// Exceptions is an immutable snapshot of the exceptions in a cluster (or
// given to the CLI), by namespace.
type Exceptions struct {
	byNamespace map[string][]*Exception
	n           int
	// clockSkew is how long before its ExpiresAt an exception stops
	// applying by the local clock.
	clockSkew time.Duration
	// clock is the time reviews are judged at; time.Now when nil.
	clock func() time.Time
}

// WithClock returns a copy of x whose Now is now: the CLI judges at a
// time a test pins. A nil x stays nil.
func (x *Exceptions) WithClock(now func() time.Time) *Exceptions {
	if x == nil {
		return nil
	}
	c := *x
	c.clock = now
	return &c
}

// Now is the time a review is judged at: the clock of WithClock, else
// the local clock.
func (x *Exceptions) Now() time.Time {
	if x != nil && x.clock != nil {
		return x.clock()
	}
	return time.Now()
}

// NewExceptions makes a snapshot of es. An exception stops applying
// clockSkew before its ExpiresAt by the clock of the caller of InForce and
// Except: a clock behind the others by up to clockSkew never applies one
// after it expired.
func NewExceptions(clockSkew time.Duration, es ...*Exception) *Exceptions {
	x := &Exceptions{byNamespace: map[string][]*Exception{}, clockSkew: max(clockSkew, 0)}
	for _, e := range es {
		if e != nil {
			x.byNamespace[e.Namespace] = append(x.byNamespace[e.Namespace], e)
			x.n++
		}
	}
	for _, l := range x.byNamespace {
		slices.SortFunc(l, func(a, b *Exception) int { return cmp.Compare(a.Name, b.Name) })
	}
	return x
}

// Len returns the number of exceptions; a nil snapshot has none.
func (x *Exceptions) Len() int {
	if x == nil {
		return 0
	}
	return x.n
}

// All returns the exceptions, by namespace then name.
func (x *Exceptions) All() []*Exception {
	if x == nil {
		return nil
	}
	var out []*Exception
	for _, l := range x.byNamespace {
		out = append(out, l...)
	}
	slices.SortFunc(out, func(a, b *Exception) int { return cmp.Compare(a.Ref(), b.Ref()) })
	return out
}

// InForce reports whether e applies at now: now is before its ExpiresAt
// less the clock skew allowed.
func (x *Exceptions) InForce(e *Exception, now time.Time) bool {
	skew := time.Duration(0)
	if x != nil {
		skew = x.clockSkew
	}
	return now.Add(skew).Before(e.ExpiresAt)
}

// Excepted is a deny message an exception lifted.
type Excepted struct {
	Violation
	// Exception is the first exception, by name, that covers it.
	Exception *Exception
}

// ExceptedLine is what the user sees of a lifted denial, after
// "[policy] ": "allowed by exception ns/name (ticket OPS-123) until
// 2026-12-04T18:00:00Z: message".
func ExceptedLine(e *Exception, msg string) string {
	ticket := ""
	if e.Ticket != "" {
		ticket = " (ticket " + e.Ticket + ")"
	}
	return fmt.Sprintf("allowed by exception %s%s until %s: %s", e.Ref(), ticket, e.ExpiresAt.UTC().Format(time.RFC3339), msg)
}

// Except lifts the deny messages of d that an exception in force at now
// covers for the subject: they move from Deny to Excepted. Only denials
// are lifted: the deny messages of a policy whose enforcementAction is
// deny; evaluation errors, warn rules and warn or dry-run policies are
// left as they are. It returns how many it
// lifted.
func (x *Exceptions) Except(d *Decision, s *Subject, now time.Time) int {
	if x == nil {
		return 0
	}
	var cover []*Exception
	for _, e := range x.byNamespace[s.Namespace] {
		if x.InForce(e, now) && e.matches(s) {
			cover = append(cover, e)
		}
	}
	if len(cover) == 0 {
		return 0
	}
	lifted := 0
	for i := range d.Results {
		r := &d.Results[i]
		if r.Err != nil || r.Action != ActionDeny || len(r.Deny) == 0 {
			continue
		}
		idx := slices.IndexFunc(cover, func(e *Exception) bool { return e.names(r.Source, r.Policy) })
		if idx < 0 {
			continue
		}
		for _, v := range r.Deny {
			r.Excepted = append(r.Excepted, Excepted{Violation: v, Exception: cover[idx]})
		}
		lifted += len(r.Deny)
		r.Deny = nil
	}
	return lifted
}

// ExceptedBy returns the refs of the exceptions that lifted a denial of d,
// sorted.
func (d Decision) ExceptedBy() []string {
	var out []string
	for i := range d.Results {
		for _, e := range d.Results[i].Excepted {
			out = append(out, e.Exception.Ref())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// exceptedLines are a result's lifted denials as warning lines.
func (r *Result) exceptedLines(prefix string) []string {
	out := make([]string, 0, len(r.Excepted))
	for _, e := range r.Excepted {
		out = append(out, prefix+ExceptedLine(e.Exception, e.Msg))
	}
	return out
}
