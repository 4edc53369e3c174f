package archive

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

// OCI layer whiteouts: .wh.<name> deletes <name>; .wh..wh..opq in a
// directory deletes what the directory held. Other .wh..wh. names are
// AUFS bookkeeping, ignored.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// whiteout applies the whiteout base found in dir (relative to the root).
// It removes only entries this extraction created: what was in the
// destination before is not the archive's to delete.
func (e *extractor) whiteout(hdrName, dir, base string) error {
	switch {
	case base == whiteoutOpaque:
		return e.remove(hdrName, dir, false)
	case strings.HasPrefix(base, whiteoutMeta):
		return nil
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return refuse(hdrName, "is a whiteout that names no entry")
	}
	return e.remove(hdrName, path.Join(dir, name), true)
}

// track notes p, an entry or a directory this extraction made, as a
// child of its directory.
func (e *extractor) track(p string) {
	d := path.Dir(p)
	if e.kids[d] == nil {
		e.kids[d] = map[string]bool{}
	}
	e.kids[d][p] = true
}

// remove deletes what this extraction created below target, and target
// itself when self: entries, and the directories it made for them.
// Directories that were there before stay.
func (e *extractor) remove(hdrName, target string, self bool) error {
	var paths []string
	var walk func(p string)
	walk = func(p string) {
		paths = append(paths, p)
		for k := range e.kids[p] {
			walk(k)
		}
	}
	if self {
		if e.kids[path.Dir(target)][target] {
			walk(target)
		}
	} else {
		for k := range e.kids[target] {
			walk(k)
		}
	}
	// Children sort after their parents: remove them first.
	slices.Sort(paths)
	slices.Reverse(paths)
	for _, p := range paths {
		if err := e.removeOne(p); err != nil {
			return fmt.Errorf("whiteout %.200q: removing %s: %w", hdrName, p, err)
		}
	}
	return nil
}

// removeOne removes p, a path this extraction tracks, and forgets it.
func (e *extractor) removeOne(p string) error {
	fi, err := e.root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case !fi.IsDir():
		if err := e.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case e.created[p]:
		err := e.root.Remove(p)
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return nil // something else wrote there: keep it, and keep tracking it
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if i, ok := e.index[p]; ok {
		e.entries[i] = nil
		delete(e.index, p)
	}
	delete(e.created, p)
	delete(e.realDirs, p) // checked, and tracked, again when next used
	delete(e.kids, p)
	delete(e.kids[path.Dir(p)], p)
	return nil
}
