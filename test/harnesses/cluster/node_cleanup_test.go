package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNodeFootprintRealPaths: the footprint finds the node's programs by
// the paths /proc/<pid>/exe gives, the real ones, when bin/k8s and
// bin/node are links to another tree's builds.
func TestNodeFootprintRealPaths(t *testing.T) {
	other, root := t.TempDir(), t.TempDir()
	built := builtNodeBinaries(other)
	for _, p := range []string{built.kubelet, built.containerd, built.shim} {
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o750); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"k8s", "node"} {
		if err := os.Symlink(filepath.Join(other, "bin", d), filepath.Join(root, "bin", d)); err != nil {
			t.Fatal(err)
		}
	}
	f := newNodeFootprint(filepath.Join(root, "node"), builtNodeBinaries(root))
	// TempDir may itself be under a link (macOS's /var): compare real paths.
	var want []string
	for _, p := range []string{built.kubelet, built.containerd, built.shim} {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, real)
	}
	if diff := cmp.Diff(want, f.binaries); diff != "" {
		t.Errorf("binaries (-want +got):\n%s", diff)
	}
}
