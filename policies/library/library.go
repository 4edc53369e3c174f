// Package library holds the Rego policies modelgate ships: small, commented
// policies that platform teams install as WorkloadPolicy objects (samples in
// config/samples/policies) or copy and adapt. Each policy <name>.rego sits
// beside its tests, <name>_test.rego; `go test ./policies/library/` runs them.
package library

import (
	"embed"
	"strings"
)

// TestSuffix ends the name of a policy's test file: <name>_test.rego.
const TestSuffix = "_test.rego"

// FS holds every policy (<name>.rego) and its tests (<name>_test.rego), at
// its root. Tools that install or evaluate the policies must skip the files
// ending in TestSuffix; Names lists the policies alone.
//
//go:embed *.rego
var FS embed.FS

// Names returns the names of the shipped policies, sorted: their file names
// without ".rego", test files left out.
func Names() []string {
	entries, err := FS.ReadDir(".")
	if err != nil {
		// Unreachable: the root of an embed.FS always exists.
		return nil
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, TestSuffix) {
			continue
		}
		names = append(names, strings.TrimSuffix(name, ".rego"))
	}
	return names
}
