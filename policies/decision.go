package policies

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Decision is the outcome of one review: the results of every policy that
// applied, by policy name, then source.
type Decision struct {
	Results []Result
}

// Result is the outcome of one policy.
type Result struct {
	// Policy and Source identify the policy.
	Policy, Source string
	// Action and FailurePolicy are the policy's.
	Action        Action
	FailurePolicy FailurePolicy
	// Deny and Warn are the messages of the deny and warn rules, by
	// message. Both are empty when Err is set.
	Deny, Warn []Violation
	// Ratchet says the policy ratchets updates (its default); Ratcheted
	// are the deny messages of an UPDATE that the old object had too,
	// moved out of Deny by Decision.Ratchet: shown as warnings.
	Ratchet   bool
	Ratcheted []Violation
	// Excepted are the deny messages an exception lifted
	// (Exceptions.Except): shown as warnings naming the exception.
	Excepted []Excepted
	// Err is the evaluation error, if any: OPA's, a deadline (wrapping
	// context.DeadlineExceeded) or a message that breaks the contract.
	Err error
	// Duration is how long the evaluation took.
	Duration time.Duration
}

// Violation is one message of a deny or warn rule.
type Violation struct {
	// Msg is the message: the set element if a string, else its msg.
	Msg string
	// Details is the object's details converted to Go (maps, slices,
	// strings, json.Number, bool, nil), nil when absent.
	Details any
}

// Decision names the outcome for metrics and logs: "error" when the policy
// failed, "excepted" when an exception lifted all its deny messages,
// "ratcheted" when its only deny messages left were the old object's too,
// "allow" when it gave no message, "dryrun" when it gave some in dry-run
// mode, "deny" when it denied, else "warn".
func (r *Result) Decision() string {
	switch {
	case r.Err != nil:
		return "error"
	case len(r.Excepted) > 0 && len(r.Deny) == 0 && len(r.Ratcheted) == 0:
		return "excepted"
	case len(r.Ratcheted) > 0 && len(r.Deny) == 0:
		return "ratcheted"
	case len(r.Deny) == 0 && len(r.Warn) == 0:
		return "allow"
	case r.Action == ActionDryRun:
		return "dryrun"
	case r.Action == ActionDeny && len(r.Deny) > 0:
		return "deny"
	default:
		return "warn"
	}
}

// lines renders what the user sees of the result, as "[policy] message"
// lines in message order. A dry-run policy shows nothing; an error shows
// as a denial, or as a warning under FailAllow.
func (r *Result) lines() (denials, warnings []string) {
	if r.Action == ActionDryRun {
		return nil, nil
	}
	prefix := "[" + r.Policy + "] "
	if r.Err != nil {
		line := prefix + "policy evaluation failed: " + r.Err.Error()
		if r.FailurePolicy == FailAllow {
			return nil, []string{line}
		}
		return []string{line}, nil
	}
	for _, v := range r.Deny {
		if r.Action == ActionDeny {
			denials = append(denials, prefix+v.Msg)
		} else {
			warnings = append(warnings, prefix+v.Msg)
		}
	}
	for _, v := range r.Warn {
		warnings = append(warnings, prefix+v.Msg)
	}
	for _, v := range r.Ratcheted {
		warnings = append(warnings, prefix+RatchetedPrefix+v.Msg)
	}
	warnings = append(warnings, r.exceptedLines(prefix)...)
	slices.Sort(warnings)
	return slices.Compact(denials), slices.Compact(warnings)
}

// Denials returns the lines that deny the review.
func (d Decision) Denials() []string {
	var out []string
	for i := range d.Results {
		deny, _ := d.Results[i].lines()
		out = append(out, deny...)
	}
	return out
}

// Warnings returns the lines to show the user as warnings.
func (d Decision) Warnings() []string {
	var out []string
	for i := range d.Results {
		_, warn := d.Results[i].lines()
		out = append(out, warn...)
	}
	return out
}

// Allowed reports whether no policy denied the review.
func (d Decision) Allowed() bool { return len(d.Denials()) == 0 }

var (
	msgKey     = ast.StringTerm("msg")
	detailsKey = ast.StringTerm("details")
)

// violations reads the value of a deny or warn rule: a set whose elements
// are strings or objects with a string msg and optional details.
func violations(rule string, t *ast.Term) ([]Violation, error) {
	if t == nil {
		return nil, fmt.Errorf("%s has no value", rule)
	}
	set, ok := t.Value.(ast.Set)
	if !ok {
		return nil, fmt.Errorf("%s must be a set of messages, got %s", rule, describe(t.Value))
	}
	out := make([]Violation, 0, set.Len())
	sorted := set.Sorted()
	for i := range sorted.Len() {
		v, err := violation(sorted.Elem(i).Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rule, err)
		}
		out = append(out, v)
	}
	// Sorted orders by value; keep that as the tie-break between messages.
	slices.SortStableFunc(out, func(a, b Violation) int { return cmp.Compare(a.Msg, b.Msg) })
	return out, nil
}

func violation(v ast.Value) (Violation, error) {
	switch v := v.(type) {
	case ast.String:
		return Violation{Msg: string(v)}, nil
	case ast.Object:
		var out Violation
		var err error
		v.Until(func(k, val *ast.Term) bool {
			switch {
			case k.Equal(msgKey):
				s, ok := val.Value.(ast.String)
				if !ok {
					err = fmt.Errorf("msg must be a string, got %s", describe(val.Value))
				}
				out.Msg = string(s)
			case k.Equal(detailsKey):
				out.Details, err = ast.JSON(val.Value)
			default:
				err = fmt.Errorf("message object has key %s: only msg and details are allowed", k)
			}
			return err != nil
		})
		if err == nil && v.Get(msgKey) == nil {
			err = fmt.Errorf("message object has no msg: %s", describe(v))
		}
		return out, err
	default:
		return Violation{}, fmt.Errorf("message must be a string or an object with a msg, got %s", describe(v))
	}
}

// describe names a value's type and shows it, shortened.
func describe(v ast.Value) string {
	const maxLen = 60
	s := v.String()
	if len(s) > maxLen {
		cut := maxLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return ast.ValueName(v) + " " + s
}
