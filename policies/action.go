package policies

import "fmt"

// Action is what a policy's deny messages do to a review.
type Action string

const (
	// ActionDeny turns deny messages into denials (the default).
	ActionDeny Action = "deny"
	// ActionWarn turns deny messages into warnings.
	ActionWarn Action = "warn"
	// ActionDryRun evaluates the policy but shows nothing to the user: its
	// results are only observed and logged.
	ActionDryRun Action = "dryrun"
)

// ParseAction parses an enforcement action. The empty string is ActionDeny.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case "":
		return ActionDeny, nil
	case ActionDeny, ActionWarn, ActionDryRun:
		return a, nil
	default:
		return "", fmt.Errorf("enforcement action %q is not valid: can only be one of %s, %s, %s",
			s, ActionDeny, ActionWarn, ActionDryRun)
	}
}

// FailurePolicy is what an evaluation error of a policy does to a review.
type FailurePolicy string

const (
	// FailDeny denies the review when the policy cannot be evaluated (the
	// default).
	FailDeny FailurePolicy = "deny"
	// FailAllow lets the review through with a warning when the policy
	// cannot be evaluated.
	FailAllow FailurePolicy = "allow"
)

// ParseFailurePolicy parses a failure policy. The empty string is FailDeny.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch f := FailurePolicy(s); f {
	case "":
		return FailDeny, nil
	case FailDeny, FailAllow:
		return f, nil
	default:
		return "", fmt.Errorf("failure policy %q is not valid: can only be one of %s, %s", s, FailDeny, FailAllow)
	}
}
