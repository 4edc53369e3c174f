package pack

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// kind is what a tar entry is.
type kind int

const (
	kindDir kind = iota
	kindFile
	kindSymlink
)

// entry is one tar entry, in the image's normal form: only the
// properties the image keeps.
type entry struct {
	// name is slash separated and relative, without a trailing slash.
	name string
	kind kind
	// size is a file's; exec says one of its execute bits is set.
	size int64
	exec bool
	// link is a symbolic link's target, as the link has it.
	link string
}

// plan is the entries of one layer.
type plan struct {
	// what names the layer in messages: its large file's path, or
	// smallFiles.
	what    string
	entries []entry
}

// smallFiles names the last layer in messages.
const smallFiles = "the small files, links and directories"

// plans walks dir in sorted order and splits it into layers: one per
// regular file of at least o.LayerThreshold, each with its parent
// directories, then one holding every directory, smaller file and link
// (omitted when there are none). It follows no symbolic link.
func plans(dir string, o *Options) ([]plan, error) {
	var large []plan
	last := plan{what: smallFiles}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if rel == "." {
			if !d.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			return nil
		}
		rel = filepath.ToSlash(rel)
		if o.excluded(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info() // WalkDir's is an Lstat
		if err != nil {
			return err
		}
		e, err := entryOf(p, rel, info)
		if err != nil {
			return err
		}
		if e.kind == kindFile && e.size >= o.LayerThreshold {
			large = append(large, plan{what: rel, entries: append(parents(rel), e)})
			return nil
		}
		last.entries = append(last.entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(last.entries) > 0 {
		large = append(large, last)
	}
	return large, nil
}

// entryOf is the entry of the file at p, named rel.
func entryOf(p, rel string, info fs.FileInfo) (entry, error) {
	switch m := info.Mode(); {
	case m.IsDir():
		return entry{name: rel, kind: kindDir}, nil
	case m.IsRegular():
		return entry{name: rel, kind: kindFile, size: info.Size(), exec: m.Perm()&0o111 != 0}, nil
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return entry{}, err
		}
		return entry{name: rel, kind: kindSymlink, link: filepath.ToSlash(target)}, nil
	default:
		return entry{}, fmt.Errorf("%s is a %s: only regular files, directories and symbolic links can be packed", rel, typeName(m))
	}
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "special file"
	}
}

// parents are the directory entries above rel, outermost first.
func parents(rel string) []entry {
	var out []entry
	for i, c := range rel {
		if c == '/' {
			out = append(out, entry{name: rel[:i], kind: kindDir})
		}
	}
	return out
}
