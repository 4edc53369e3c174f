package archive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/modelgate/modelgate/loader"
)

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name string
	typ  byte // tar.TypeReg when 0
	body string
	mode int64 // 0o644 when 0
	link string
}

func file(name, body string) tarEntry { return tarEntry{name: name, body: body} }
func dir(name string) tarEntry        { return tarEntry{name: name, typ: tar.TypeDir} }
func symlink(name, to string) tarEntry {
	return tarEntry{name: name, typ: tar.TypeSymlink, link: to}
}
func hardlink(name, to string) tarEntry { return tarEntry{name: name, typ: tar.TypeLink, link: to} }

// makeTar writes entries as a tar stream, in the PAX format where a name
// needs it.
func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: h.Typeflag, PAXRecords: map[string]string{"comment": "git archive"}}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing %q: %v", e.name, err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// compress compresses a tar stream as format says.
func compress(t testing.TB, format loader.Archive, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch format {
	case loader.ArchiveTar:
		return data
	case loader.ArchiveTarGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case loader.ArchiveTarZstd:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown format %q", format)
	}
	return buf.Bytes()
}

// sandbox is a parent directory holding the destination root and, beside
// it, a directory that extraction must never touch.
type sandbox struct {
	parent, dir, outside string
	root                 *os.Root
}

const secretContent = "not yours"

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	s := &sandbox{parent: t.TempDir()}
	s.dir = filepath.Join(s.parent, "root")
	s.outside = filepath.Join(s.parent, "outside")
	for _, d := range []string{s.dir, s.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.outside, "secret"), []byte(secretContent), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	s.root = root
	return s
}

// checkOutside fails when anything but the root changed in the parent.
func (s *sandbox) checkOutside(t testing.TB) {
	t.Helper()
	want := map[string]bool{".": true, "root": true, "outside": true, "outside/secret": true}
	err := filepath.WalkDir(s.parent, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.parent, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "root/") {
			return fs.SkipDir
		}
		if !want[rel] {
			t.Errorf("extraction created %s outside the root", rel)
		}
		delete(want, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range want {
		t.Errorf("extraction removed %s outside the root", p)
	}
	if b, err := os.ReadFile(filepath.Join(s.outside, "secret")); err != nil || string(b) != secretContent {
		t.Errorf("outside/secret = %q, %v; want it untouched", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(s.outside, "secret")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("outside/secret changed: %v, %v", fi, err)
	}
}

// tree describes what is in the root, except the loader's state
// directory: "file 0o644 <content>", "dir", "symlink -> <target>".
func (s *sandbox) tree(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dir, p)
		rel = filepath.ToSlash(rel)
		switch rel {
		case ".":
			return nil
		case loader.StateDir:
			return fs.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + l
		case fi.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// tempFiles lists what is left in the temporary directory.
func (s *sandbox) tempFiles(t testing.TB) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(s.dir, filepath.FromSlash(DefaultTempDir)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
