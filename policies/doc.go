// Package policies will hold the Rego policy engine (OPA v1 API: prepared
// queries, atomically swapped policy snapshots) and, under library/, the
// policies modelgate ships with their _test.rego files. Nothing is
// registered from it yet.
package policies
