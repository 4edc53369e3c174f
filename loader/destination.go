package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// destinationError wraps a failure to prepare the destination. Permission
// denied becomes ErrNotWritable with what a user needs to fix it: who the
// loader runs as, who owns the directory (the nearest that exists) and
// its mode. The usual cause is a claim whose root directory is root's,
// mounted in a Pod without spec.securityContext.fsGroup.
func destinationError(dest string, err error) error {
	if !errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("destination %s: %w", dest, err)
	}
	dir := dest
	var owner string
	for {
		if info, statErr := os.Stat(dir); statErr == nil {
			if uid, gid, ok := fileOwner(info); ok {
				owner = fmt.Sprintf(" (%s is owned by %d:%d, mode %04o)", dir, uid, gid, info.Mode().Perm())
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return fmt.Errorf("destination %s is not writable by the loader's user %d (groups %s)%s: set the Pod's "+
		"spec.securityContext.fsGroup (65532 for modelgate's image), so that the kubelet gives the volume to that group, "+
		"or make the volume writable by that user: %w: %w", dest, os.Getuid(), groupList(), owner, err, ErrNotWritable)
}

// groupList is the process's groups, for a message: "1000,65532".
func groupList() string {
	gs, err := os.Getgroups()
	if err != nil || len(gs) == 0 {
		return fmt.Sprint(os.Getgid())
	}
	s := make([]string, len(gs))
	for i, g := range gs {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ",")
}
