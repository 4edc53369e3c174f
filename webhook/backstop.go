package webhook

// FailOpenWithBackstop are the webhooks that fail open (failurePolicy:
// Ignore) when the Configuration's policy.backstop puts the API server's
// ValidatingAdmissionPolicies in force: injection, and modelgate's own
// judging of workloads, which then adds the Rego-only checks, messages and
// ratcheting on top of the generated policies. The chart derives their
// failurePolicy from policy.backstop (hack/helmchart), config/backstop
// patches them, and the simulated cluster (Options.Backstop) sets them;
// every other webhook fails closed whatever the setting: a WorkloadPolicy,
// an exception or an AIInference is never admitted unchecked.
var FailOpenWithBackstop = []string{
	"namespace.inject.modelgate.io",
	"annotation.inject.modelgate.io",
	"namespace.validate.modelgate.io",
	"workload.validate.modelgate.io",
	"scope.validate.modelgate.io",
}
