// Package packtest holds what the tests of images made by pack
// share: extracting their layers strictly, as a container runtime would,
// and describing a directory tree to compare with another.
package packtest

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Tree describes what a directory holds, keyed by slash path: a
// directory, a file by its SHA-256 and whether it is executable, a link
// by its target. Paths under skip are left out.
func Tree(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s {
				return filepath.SkipDir
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case rel == ".":
		case m.IsDir():
			out[rel] = "dir"
		case m&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case m.IsRegular():
			f, err := os.Open(p) //nolint:gosec // a file of the tree the test describes
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %s exec=%t", hex.EncodeToString(h.Sum(nil))[:16], m.Perm()&0o111 != 0)
		default:
			out[rel] = "special " + m.String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Extract extracts a layer's tar stream into dir as a container runtime
// would, but strictly: an entry whose parent directory is not in dir
// already is an error, so a layer must carry its own parents when
// extracted alone.
func Extract(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q leads out of the layer", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		fi, err := os.Lstat(filepath.Dir(p))
		if err != nil {
			return fmt.Errorf("entry %q: its parent directory is not there (%w)", h.Name, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("entry %q: its parent directory is not there (not a directory)", h.Name)
		}
		// The entry's permission bits; set-id and sticky bits are not
		// applied.
		perm := h.FileInfo().Mode().Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, perm); err != nil && !os.IsExist(err) {
				return err
			}
		case tar.TypeReg:
			_ = os.Remove(p)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm) //nolint:gosec // p is local to dir (checked above)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil { //nolint:gosec // tar.Reader yields at most the entry's size; the layers are the tests' own
				_ = f.Close() // the copy's error is the one to report
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q has type %q", h.Name, h.Typeflag)
		}
	}
}

// ExtractLayer extracts l into dir, as Extract does.
func ExtractLayer(l v1.Layer, dir string) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return Extract(rc, dir)
}
