package certmanager

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestVersionIsTheModules holds Version to the cert-manager that
// test/certmanager/go.mod requires (the Makefile holds its
// CERT_MANAGER_VERSION to the same): Dir names the folder the Makefile
// builds that one into.
func TestVersionIsTheModules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "certmanager", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/cert-manager/cert-manager (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("test/certmanager/go.mod requires no github.com/cert-manager/cert-manager")
	}
	if got := string(m[1]); got != Version {
		t.Errorf("test/certmanager/go.mod requires cert-manager %s, Version is %s: keep them equal", got, Version)
	}
}
