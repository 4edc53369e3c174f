//go:build linux

package loader_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// TestFullDisk runs out of room in the middle of a load, on a real
// filesystem: a tmpfs with bytes to spare but few inodes, so the
// free-space check passes and creating files fails part way. The load
// fails as "no space", and leaves no manifest and nothing at a final path.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,nr_inodes=24", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	files := map[string]loadertest.Content{}
	for i := range 40 {
		files[fmt.Sprintf("shard-%02d.bin", i)] = loadertest.Generated(uint64(i), 10_000)
	}
	srv := loadertest.NewServer(files)
	defer srv.Close()
	dest := filepath.Join(dir, "model")
	_, err := loader.Load(context.Background(), srv.Source(nil), fastOptions(dest, "s3://b/m"))
	if !errors.Is(err, loader.ErrNoSpace) {
		t.Fatalf("error = %v, want ErrNoSpace", err)
	}
	t.Logf("error: %v", err)
	assertIncomplete(t, dest)
	if _, err := os.Stat(dest); err != nil {
		t.Fatal(err)
	}
}
