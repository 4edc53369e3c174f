// Package validators holds what modelgate checks at validating admission:
// the adapter that turns an admitted workload into the policy input
// (input.workload, the raw objects) and runs the Rego policies of package
// policies over it. The webhook's validating handler and the offline
// render command both go through it, so a policy decides the same way in
// the cluster and in CI.
package validators
