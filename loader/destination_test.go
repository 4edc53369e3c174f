package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Permission denied on the destination names the loader's user, the
// nearest directory's owner and mode, and the fix; anything else keeps
// its own kind.
func TestDestinationError(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(dir, "not", "there")
	denied := &fs.PathError{Op: "mkdirat", Path: ".modelgate", Err: fs.ErrPermission}
	err := destinationError(dest, denied)
	if !errors.Is(err, ErrNotWritable) || !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("%v: want ErrNotWritable wrapping the permission error", err)
	}
	want := []string{
		"destination " + dest + " is not writable by the loader's user " + fmt.Sprint(os.Getuid()),
		"spec.securityContext.fsGroup (65532",
		"mkdirat .modelgate: permission denied",
	}
	if runtime.GOOS == "linux" {
		want = append(want, fmt.Sprintf("(%s is owned by %d:%d, mode 0755)", dir, os.Getuid(), os.Getgid()))
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q\nwant it to hold %q", err, w)
		}
	}
	if k := Kind(err); !errors.Is(k, ErrNotWritable) {
		t.Errorf("Kind = %v, want ErrNotWritable", k)
	}

	other := destinationError(dest, fmt.Errorf("disk full: %w", ErrNoSpace))
	if errors.Is(other, ErrNotWritable) || !errors.Is(other, ErrNoSpace) {
		t.Errorf("%v: want ErrNoSpace only", other)
	}
}
