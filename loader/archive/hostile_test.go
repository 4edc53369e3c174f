package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

func TestExtractRefused(t *testing.T) {
	tests := map[string]struct {
		entries []tarEntry
		opts    Options
		// absent must not exist in the root afterwards.
		absent []string
	}{
		"dot dot":                      {entries: []tarEntry{file("../evil", "x")}},
		"dot dot inside":               {entries: []tarEntry{file("a/../../evil", "x")}, absent: []string{"a"}},
		"dot dot last":                 {entries: []tarEntry{file("a/..", "x")}},
		"dot dot after slash":          {entries: []tarEntry{file("/../outside/secret", "x")}},
		"backslash":                    {entries: []tarEntry{file(`a\..\..\evil`, "x")}},
		"empty segment":                {entries: []tarEntry{file("a//b", "x")}, absent: []string{"a"}},
		"name too long":                {entries: []tarEntry{file("d/"+strings.Repeat("n", 256), "x")}, absent: []string{"d"}},
		"loader state":                 {entries: []tarEntry{file(".modelgate/manifest.json", "{}")}},
		"hub cache":                    {entries: []tarEntry{file(".cache/huggingface/hub/x", "x")}, absent: []string{".cache"}},
		"no name":                      {entries: []tarEntry{file(".", "x")}},
		"character device":             {entries: []tarEntry{{name: "dev/null", typ: tar.TypeChar}}, absent: []string{"dev/null"}},
		"block device":                 {entries: []tarEntry{{name: "sda", typ: tar.TypeBlock}}, absent: []string{"sda"}},
		"FIFO":                         {entries: []tarEntry{{name: "pipe", typ: tar.TypeFifo}}, absent: []string{"pipe"}},
		"unknown type":                 {entries: []tarEntry{{name: "odd", typ: 'Z'}}, absent: []string{"odd"}},
		"absolute symlink":             {entries: []tarEntry{symlink("passwd", "/etc/passwd")}, absent: []string{"passwd"}},
		"symlink out of the root":      {entries: []tarEntry{symlink("a/out", "../../outside")}, absent: []string{"a/out"}},
		"symlink to the root":          {entries: []tarEntry{symlink("a/b/up", "../..")}, absent: []string{"a/b/up"}},
		"symlink to the loader state":  {entries: []tarEntry{symlink("s", ".modelgate")}, absent: []string{"s"}},
		"symlink without target":       {entries: []tarEntry{symlink("s", "")}, absent: []string{"s"}},
		"symlink with backslash":       {entries: []tarEntry{symlink("s", `..\..\outside`)}, absent: []string{"s"}},
		"symlink then a file through":  {entries: []tarEntry{dir("d/"), symlink("l", "d"), file("l/x", "x")}, absent: []string{"d/x", "l/x"}},
		"symlink then a dir through":   {entries: []tarEntry{dir("d/"), symlink("l", "d"), dir("l/sub/")}, absent: []string{"d/sub"}},
		"hard link to nothing":         {entries: []tarEntry{hardlink("h", "nothing")}, absent: []string{"h"}},
		"hard link to a directory":     {entries: []tarEntry{dir("d/"), hardlink("h", "d")}, absent: []string{"h"}},
		"hard link to a later file":    {entries: []tarEntry{hardlink("h", "later"), file("later", "x")}, absent: []string{"h", "later"}},
		"hard link out of the root":    {entries: []tarEntry{hardlink("h", "../outside/secret")}, absent: []string{"h"}},
		"hard link to a symlink":       {entries: []tarEntry{file("f", "x"), symlink("s", "f"), hardlink("h", "s")}, absent: []string{"h"}},
		"hard link to a removed file":  {entries: []tarEntry{file("f", "x"), file(".wh.f", ""), hardlink("h", "f")}, absent: []string{"h"}},
		"file over a directory":        {entries: []tarEntry{file("d/x", "x"), file("d", "x")}},
		"symlink over a directory":     {entries: []tarEntry{file("d/x", "x"), symlink("d", "e")}},
		"directory over a file":        {entries: []tarEntry{file("f", "x"), dir("f/")}},
		"whiteout of nothing":          {entries: []tarEntry{file("d/.wh.", "")}},
		"into the temporary directory": {entries: []tarEntry{file("tmp/x", "x")}, opts: Options{TempDir: "tmp"}, absent: []string{"tmp/x"}},
		"too many entries": {
			entries: []tarEntry{file("a", "a"), file("b", "b"), file("c", "c")},
			opts:    Options{MaxEntries: 2},
			absent:  []string{"c"},
		},
		"too many bytes": {
			entries: []tarEntry{file("a", "0123456789"), file("b", "0123456789")},
			opts:    Options{MaxBytes: 15},
			absent:  []string{"b"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := extract(t, s, makeTar(t, tc.entries...), loader.ArchiveTar, "", tc.opts)
			if !errors.Is(err, loader.ErrVerification) {
				t.Fatalf("Extract: %v, want ErrVerification", err)
			}
			t.Log(err)
			for _, p := range tc.absent {
				if _, err := s.root.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s exists after a refused extraction (%v)", p, err)
				}
			}
			s.checkOutside(t)
		})
	}
}

// TestExtractPlantedLinks plants symbolic links in the destination before
// extracting: no write may go through them.
func TestExtractPlantedLinks(t *testing.T) {
	tests := map[string]struct {
		plant   func(s *sandbox) error
		entries []tarEntry
		under   string
		// wantErr is false where the planted link is simply replaced.
		wantErr bool
		want    map[string]string
	}{
		"absolute link to a directory outside": {
			plant:   func(s *sandbox) error { return os.Symlink(s.outside, filepath.Join(s.dir, "evil")) },
			entries: []tarEntry{file("evil/secret", "pwned"), file("evil/new", "pwned")},
			wantErr: true,
		},
		"relative link to a directory outside": {
			plant:   func(s *sandbox) error { return os.Symlink("../outside", filepath.Join(s.dir, "evil")) },
			entries: []tarEntry{dir("evil/sub/")},
			wantErr: true,
		},
		"link inside the root": {
			plant: func(s *sandbox) error {
				return errors.Join(os.Mkdir(filepath.Join(s.dir, "real"), 0o755), os.Symlink("real", filepath.Join(s.dir, "alias")))
			},
			entries: []tarEntry{file("alias/x", "x")},
			wantErr: true,
		},
		"link as the directory extracted under": {
			plant:   func(s *sandbox) error { return os.Symlink(s.outside, filepath.Join(s.dir, "models")) },
			entries: []tarEntry{file("secret", "pwned")},
			under:   "models",
			wantErr: true,
		},
		"link to a file outside, replaced by a file": {
			plant: func(s *sandbox) error {
				return os.Symlink(filepath.Join(s.outside, "secret"), filepath.Join(s.dir, "f"))
			},
			entries: []tarEntry{file("f", "mine")},
			want:    map[string]string{"f": "file -rw-r--r-- mine"},
		},
		"link to a file outside, replaced by a hard link": {
			plant: func(s *sandbox) error {
				return os.Symlink(filepath.Join(s.outside, "secret"), filepath.Join(s.dir, "h"))
			},
			entries: []tarEntry{file("f", "mine"), hardlink("h", "f")},
			want:    map[string]string{"f": "file -rw-r--r-- mine", "h": "file -rw-r--r-- mine"},
		},
		"link to a directory outside, replaced by a symlink": {
			plant:   func(s *sandbox) error { return os.Symlink(s.outside, filepath.Join(s.dir, "l")) },
			entries: []tarEntry{file("f", "mine"), symlink("l", "f")},
			want:    map[string]string{"f": "file -rw-r--r-- mine", "l": "symlink -> f"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			if err := tc.plant(s); err != nil {
				t.Fatal(err)
			}
			_, err := extract(t, s, makeTar(t, tc.entries...), loader.ArchiveTar, tc.under, Options{})
			if tc.wantErr {
				if err == nil {
					t.Fatal("Extract succeeded, want an error")
				}
				t.Log(err)
			} else {
				if err != nil {
					t.Fatalf("Extract: %v", err)
				}
				if diff := cmp.Diff(tc.want, s.tree(t)); diff != "" {
					t.Errorf("files (-want +got):\n%s", diff)
				}
			}
			s.checkOutside(t)
		})
	}
}

// bomb is a file of n zero bytes: it compresses to almost nothing.
func bomb(t *testing.T, format loader.Archive, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "bomb.bin", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n)}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return compress(t, format, buf.Bytes())
}

func TestExtractBomb(t *testing.T) {
	for _, format := range []loader.Archive{loader.ArchiveTarGzip, loader.ArchiveTarZstd} {
		t.Run(string(format), func(t *testing.T) {
			s := newSandbox(t)
			data := bomb(t, format, 64<<20)
			if len(data) > 1<<20 {
				t.Fatalf("the bomb is %d bytes compressed; want a small one", len(data))
			}
			_, err := extract(t, s, data, format, "", Options{MaxBytes: 1 << 20})
			if !errors.Is(err, loader.ErrVerification) {
				t.Fatalf("Extract: %v, want ErrVerification", err)
			}
			if _, err := s.root.Lstat("bomb.bin"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("bomb.bin exists after the bound stopped it (%v)", err)
			}
			if left := s.tempFiles(t); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
		})
	}
}

func TestExtractTruncated(t *testing.T) {
	body := make([]byte, 300000)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(rng.Uint32()) // incompressible
	}
	type cut struct {
		name string
		at   func(n int) int
		// absent must not exist afterwards.
		absent []string
	}
	inBig := cut{"in big.bin", func(n int) int { return n / 2 }, []string{"big.bin"}}
	inHeader := cut{"in the first header", func(int) int { return 300 }, []string{"small.json", "big.bin"}}
	for format, cuts := range map[loader.Archive][]cut{
		loader.ArchiveTar: {
			inBig, inHeader,
			{name: "at an entry's end", at: func(n int) int { return n - 2*blockSize }},
			{name: "in the end marker", at: func(n int) int { return n - blockSize }},
			{name: "empty", at: func(int) int { return 0 }},
		},
		loader.ArchiveTarGzip: {inBig, inHeader, {name: "in the trailer", at: func(n int) int { return n - 4 }}},
		loader.ArchiveTarZstd: {inBig, inHeader, {name: "in the checksum", at: func(n int) int { return n - 2 }}},
	} {
		full := compress(t, format, makeTar(t, file("small.json", "{}"), file("big.bin", string(body))))
		for _, c := range cuts {
			t.Run(string(format)+"/"+c.name, func(t *testing.T) {
				s := newSandbox(t)
				n := c.at(len(full))
				_, err := extract(t, s, full[:n], format, "", Options{})
				if !errors.Is(err, loader.ErrVerification) {
					t.Fatalf("Extract of %d of %d bytes: %v, want ErrVerification", n, len(full), err)
				}
				for _, p := range c.absent {
					if _, err := s.root.Lstat(p); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s exists after a truncated extraction (%v)", p, err)
					}
				}
				if left := s.tempFiles(t); len(left) > 0 {
					t.Errorf("temporary files left: %q", left)
				}
			})
		}
	}
}

func TestExtractCorruptChecksum(t *testing.T) {
	data := compress(t, loader.ArchiveTarGzip, makeTar(t, file("a", "a")))
	data[len(data)-8] ^= 0xff // the gzip trailer's CRC-32
	s := newSandbox(t)
	_, err := extract(t, s, data, loader.ArchiveTarGzip, "", Options{})
	if !errors.Is(err, loader.ErrVerification) {
		t.Fatalf("Extract: %v, want ErrVerification", err)
	}
}

// failing yields data, then fails as a cut connection does.
type failing struct {
	data []byte
	err  error
}

func (f *failing) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestExtractSourceFailure(t *testing.T) {
	data := compress(t, loader.ArchiveTarGzip, makeTar(t, file("big.bin", strings.Repeat("x", 100000))))
	s := newSandbox(t)
	cut := loader.Retryable(errors.New("connection reset by peer"), 0)
	_, err := Extract(context.Background(), &failing{data: data[:len(data)/2], err: cut}, loader.ArchiveTarGzip, s.root, "", Options{})
	if _, ok := loader.IsTransient(err); !ok || errors.Is(err, loader.ErrVerification) {
		t.Fatalf("Extract: %v, want the source's transient failure", err)
	}
	if _, err := s.root.Lstat("big.bin"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("big.bin exists after a failed extraction (%v)", err)
	}
}

// cancelling cancels its context after the first read.
type cancelling struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelling) Read(p []byte) (int, error) {
	n, err := c.r.Read(p[:min(len(p), 1024)])
	c.cancel()
	return n, err
}

func TestExtractCancel(t *testing.T) {
	data := makeTar(t, file("a", strings.Repeat("a", 10000)), file("b", "b"))
	s := newSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := Extract(ctx, &cancelling{r: bytes.NewReader(data), cancel: cancel}, loader.ArchiveTar, s.root, "", Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Extract: %v, want context.Canceled", err)
	}
	for _, p := range []string{"a", "b"} {
		if _, err := s.root.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a cancelled extraction (%v)", p, err)
		}
	}
}
