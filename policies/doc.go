// Package policies is the Rego policy engine (OPA v1 API) that judges
// admitted GPU/AI workloads, and, under library/, the policies modelgate
// ships with their _test.rego files.
//
// A policy is a Rego v1 module defining deny and/or warn, each a set of
// messages: strings, or objects {"msg": string, "details": any}. Its input
// is {"workload", "object", "oldObject", "parameters"}: the normalized
// workload view, the raw admitted objects, and the policy's own parameters.
//
// Compile checks a Policy against that contract and prepares its query
// once. A Set is an immutable snapshot of compiled policies; an Engine
// evaluates the current Set for each Review under a deadline, sharing one
// converted input among the policies, and a Store merges the policies of
// several sources (a DirSource, the WorkloadPolicy resources) and swaps a
// new Set into the Engine atomically after every change. RunTests runs
// _test.rego files with OPA's tester, and judges every input a test gives
// its policy again on the Engine, against OPA's answer.
package policies
