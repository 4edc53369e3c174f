package loader

import (
	"fmt"
	"strings"
)

// plan is a listing checked and mapped onto the destination.
type plan struct {
	files []plannedFile
	bytes int64
	hf    *hfCache
}

type plannedFile struct {
	f      *File
	id     string
	target string
}

// maxFiles bounds a listing.
const maxFiles = 1_000_000

// makePlan checks every listed path (nothing may land outside the
// destination or on a name the loader keeps), refuses duplicates and
// files that would be both a file and a directory, and picks each file's
// target.
func makePlan(l *Listing) (*plan, error) {
	if len(l.Files) == 0 {
		return nil, fmt.Errorf("the listing is empty: %w", ErrNotFound)
	}
	if len(l.Files) > maxFiles {
		return nil, fmt.Errorf("the listing has %d files, more than %d: %w", len(l.Files), maxFiles, ErrInvalid)
	}
	p := &plan{}
	if l.HF != nil {
		c, err := newHFCache(l.HF)
		if err != nil {
			return nil, err
		}
		p.hf = c
	}
	paths := map[string]bool{}
	var dirs []string
	for i := range l.Files {
		f := &l.Files[i]
		if f.Size < 0 {
			return nil, fmt.Errorf("%s: negative size %d: %w", f.Path, f.Size, ErrInvalid)
		}
		if f.Unpack != ArchiveNone {
			if f.Path != "" {
				if _, err := CleanPath(f.Path); err != nil {
					return nil, err
				}
			}
			p.add(f, "")
			continue
		}
		clean, err := CleanPath(f.Path)
		if err != nil {
			return nil, err
		}
		if paths[clean] {
			return nil, fmt.Errorf("%s is listed twice: %w", clean, ErrInvalid)
		}
		paths[clean] = true
		dirs = append(dirs, clean)
		target := clean
		if p.hf != nil {
			if target, err = p.hf.blob(f); err != nil {
				return nil, err
			}
		}
		p.add(f, target)
	}
	// a and a/b cannot both be files.
	for _, d := range dirs {
		for i := strings.IndexByte(d, '/'); i >= 0; i = nextSlash(d, i) {
			if paths[d[:i]] {
				return nil, fmt.Errorf("%s is both a file and the directory of %s: %w", d[:i], d, ErrInvalid)
			}
		}
	}
	return p, nil
}

func nextSlash(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func (p *plan) add(f *File, target string) {
	p.files = append(p.files, plannedFile{f: f, id: fileID(f), target: target})
	p.bytes += f.Size
}

// checkSpace refuses a load the destination has no room for, before a
// byte is fetched.
func checkSpace(dest string, need int64) error {
	free, err := freeSpace(dest)
	if err != nil || need <= free {
		return nil //nolint:nilerr // unknown free space: the writes will tell
	}
	return fmt.Errorf("destination %s has %s free and the model needs %s more (size the volume with modelgate.io/model-size): %w",
		dest, HumanBytes(free), HumanBytes(need), ErrNoSpace)
}

// HumanBytes formats n in decimal units, as disk sizes are sold: 14.5 GB.
func HumanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
