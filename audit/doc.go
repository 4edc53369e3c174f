// Package audit judges workloads that already run, with the webhook's own
// handlers: the policies in force now, whether the injection the mutating
// webhook would give them today is the one they carry, and whether they ask
// for GPUs in a namespace that opts every workload in while opting out.
// `modelgate audit` runs it on manifests or on a cluster's objects, and
// `modelgate serve` runs it periodically (Runner) and writes the results as
// wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace (Reports).
//
// Nothing here judges an object itself: Auditor builds the admission
// requests the API server would send for the object as stored, an UPDATE
// that changes nothing to the mutating webhook and a CREATE to the
// validating one, and reads their answers.
package audit
