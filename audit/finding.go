package audit

import "k8s.io/apimachinery/pkg/types"

// Result is a finding's result, in PolicyReport's words.
type Result string

// The results of findings. A workload that a policy has nothing to say
// about passes it; passes are counted, not listed.
const (
	// Fail: a deny-mode policy denies the workload, or it opted in and
	// carries no injection, or the mutating webhook would refuse it now.
	Fail Result = "fail"
	// Warn: a warn or dry-run policy, or a warn rule, has something to
	// say; or its injection is stale; or it asks for GPUs while opting out
	// of a namespace that opts every workload in.
	Warn Result = "warn"
	// Error: a policy failed to evaluate.
	Error Result = "error"
	// Skip: a WorkloadPolicyException in force lifted a policy's denial;
	// the finding names the exception (Finding.Exception).
	Skip Result = "skip"
)

// The policies of the findings that are modelgate's own rather than a
// WorkloadPolicy's, and their categories.
const (
	// InjectionPolicy's findings: a workload that opted in carries no
	// injection (rule "missing"), an older one (rule "stale"), or
	// annotations the mutating webhook refuses now (rule "refused").
	InjectionPolicy = "modelgate-injection"
	// GPUOptInPolicy's findings: a workload asks for GPUs in a namespace
	// labelled modelgate.io/injection=enabled, which requires every
	// workload to opt in, and opts out with modelgate.io/inject: "false".
	GPUOptInPolicy = "modelgate-gpu-opt-in"

	CategoryPolicy    = "WorkloadPolicy"
	CategoryInjection = "Injection"
)

// Ref names an audited object.
type Ref struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

// String is Kind namespace/name.
func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// Finding is one thing the audit has to say about one object.
type Finding struct {
	Object Ref
	// Policy is a WorkloadPolicy's name, InjectionPolicy or
	// GPUOptInPolicy; Rule is "deny", "warn" or "error" for a
	// WorkloadPolicy, and names the check for modelgate's own.
	Policy, Rule string
	Result       Result
	Category     string
	Message      string
	// Action is a WorkloadPolicy's enforcementAction (deny, warn,
	// dryrun); empty for modelgate's own.
	Action string
	// Exception is the namespace/name of the WorkloadPolicyException that
	// lifted the denial, for a Skip; Ticket and ExpiresAt are its.
	Exception, Ticket, ExpiresAt string
}

// Outcome is the audit of one object.
type Outcome struct {
	Object   Ref
	Findings []Finding
	// Passed are the policies that applied and had nothing to say.
	Passed []string
	// Skipped says why the object was not audited, empty when it was.
	Skipped string
}

// Worst returns the most serious result of the findings: Fail or Error
// before Warn; empty when there are none.
func (o *Outcome) Worst() Result {
	worst := Result("")
	for _, f := range o.Findings {
		switch f.Result {
		case Fail, Error:
			return f.Result
		case Warn:
			worst = Warn
		}
	}
	return worst
}
