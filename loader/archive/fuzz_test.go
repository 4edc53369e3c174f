package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/loader"
)

var fuzzFormats = []loader.Archive{loader.ArchiveTar, loader.ArchiveTarGzip, loader.ArchiveTarZstd}

// FuzzExtract extracts arbitrary streams into a root inside a parent
// directory and checks that nothing outside the root changed, that a
// failure is the archive's (ErrVerification), and that what Extract
// reports is on disk.
func FuzzExtract(f *testing.F) {
	seeds := [][]tarEntry{
		{dir("./"), file("./config.json", "{}"), dir("./w/"), {name: "./w/model.bin", body: "weights", mode: 0o4755}},
		{file("a", "a"), hardlink("b", "a"), symlink("c", "a"), symlink("w/up", "../a")},
		{file("../evil", "x")},
		{file("/etc/cron.d/evil", "x")},
		{symlink("out", "../outside"), file("out/secret", "pwned")},
		{symlink("abs", "/tmp"), file("abs/x", "x")},
		{dir("d/"), symlink("l", "d"), file("l/x", "x")},
		{file("p/q/f", "f"), symlink("p/q/s", ".."), symlink("p/q/z", "s/.."), file("p/q/z/.modelgate/manifest.json", "{}")},
		{hardlink("h", "../outside/secret")},
		{{name: "dev/sda", typ: tar.TypeBlock}},
		{file("d/x", "x"), file("d/.wh.x", ""), file("e/y", "y"), file("e/.wh..wh..opq", ""), file(".wh.d", "")},
		{file("f", "one"), file("f", "two"), dir("f/")},
	}
	for _, s := range seeds {
		data := makeTar(f, s...)
		for i, format := range fuzzFormats {
			f.Add(compress(f, format, data), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		s := newSandbox(t)
		af := fuzzFormats[int(format)%len(fuzzFormats)]
		entries, err := Extract(context.Background(), bytes.NewReader(data), af, s.root, "m", Options{MaxBytes: 1 << 20, MaxEntries: 200})
		s.checkOutside(t)
		if err != nil && !errors.Is(err, loader.ErrVerification) {
			t.Errorf("Extract failed with %q, not an ErrVerification", err)
		}
		if left := s.tempFiles(t); len(left) > 0 {
			t.Errorf("temporary files left: %q", left)
		}
		for _, e := range entries {
			if _, err := loader.CleanPath(e.Path); err != nil || (e.Path != "m" && !strings.HasPrefix(e.Path, "m/")) {
				t.Errorf("entry %q is not a clean path under m (%v)", e.Path, err)
			}
			switch e.Type {
			case TypeSymlink:
				if _, err := loader.CleanPath(path.Join(path.Dir(e.Path), e.Link)); err != nil {
					t.Errorf("symbolic link %s -> %s leaves the root", e.Path, e.Link)
				}
			case TypeFile:
				b, err := fs.ReadFile(s.root.FS(), e.Path)
				if err != nil {
					t.Errorf("file %s: %v", e.Path, err)
					continue
				}
				h := sha256.Sum256(b)
				if got := hex.EncodeToString(h[:]); got != e.SHA256 || int64(len(b)) != e.Size {
					t.Errorf("file %s: %d bytes with sha256 %s, reported %d with %s", e.Path, len(b), got, e.Size, e.SHA256)
				}
			}
		}
	})
}
