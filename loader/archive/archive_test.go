package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

func extract(t *testing.T, s *sandbox, data []byte, format loader.Archive, under string, opts Options) ([]Entry, error) {
	t.Helper()
	return Extract(context.Background(), bytes.NewReader(data), format, s.root, under, opts)
}

func TestExtract(t *testing.T) {
	model := []tarEntry{
		{name: "pax_global_header", typ: tar.TypeXGlobalHeader},
		dir("./"),
		file("./config.json", `{"model_type":"llama"}`),
		dir("./weights/"),
		{name: "./weights/model.safetensors", body: "tensors", mode: 0o600},
		{name: "./weights/run.sh", body: "#!/bin/sh", mode: 0o750},
		file("./weights/sub/deep.bin", "deep"), // its directory is not listed
		symlink("./tokenizer.bin", "weights/sub/deep.bin"),
		symlink("./weights/sub/up", "../model.safetensors"),
		hardlink("./copy.safetensors", "./weights/model.safetensors"),
	}
	entries := func(under string) []Entry {
		p := func(s string) string { return filepath.ToSlash(filepath.Join(under, s)) }
		return []Entry{
			{Path: p("config.json"), Type: TypeFile, Size: 22, Mode: 0o644, SHA256: sum(`{"model_type":"llama"}`)},
			{Path: p("weights"), Type: TypeDir, Mode: 0o755},
			{Path: p("weights/model.safetensors"), Type: TypeFile, Size: 7, Mode: 0o644, SHA256: sum("tensors")},
			{Path: p("weights/run.sh"), Type: TypeFile, Size: 9, Mode: 0o755, SHA256: sum("#!/bin/sh")},
			{Path: p("weights/sub/deep.bin"), Type: TypeFile, Size: 4, Mode: 0o644, SHA256: sum("deep")},
			{Path: p("tokenizer.bin"), Type: TypeSymlink, Mode: 0o777, Link: "weights/sub/deep.bin"},
			{Path: p("weights/sub/up"), Type: TypeSymlink, Mode: 0o777, Link: "../model.safetensors"},
			{Path: p("copy.safetensors"), Type: TypeFile, Size: 7, Mode: 0o644, SHA256: sum("tensors")},
		}
	}
	tree := map[string]string{
		"config.json":               `file -rw-r--r-- {"model_type":"llama"}`,
		"weights":                   "dir",
		"weights/model.safetensors": "file -rw-r--r-- tensors",
		"weights/run.sh":            "file -rwxr-xr-x #!/bin/sh",
		"weights/sub":               "dir",
		"weights/sub/deep.bin":      "file -rw-r--r-- deep",
		"weights/sub/up":            "symlink -> ../model.safetensors",
		"tokenizer.bin":             "symlink -> weights/sub/deep.bin",
		"copy.safetensors":          "file -rw-r--r-- tensors",
	}
	tests := map[string]struct {
		format loader.Archive
		under  string
	}{
		"tar":                {format: loader.ArchiveTar},
		"tar+gzip":           {format: loader.ArchiveTarGzip},
		"tar+zstd":           {format: loader.ArchiveTarZstd},
		"tar+zstd under dir": {format: loader.ArchiveTarZstd, under: "models/llama"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			got, err := extract(t, s, compress(t, tc.format, makeTar(t, model...)), tc.format, tc.under, Options{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if diff := cmp.Diff(entries(tc.under), got); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			wantTree := map[string]string{}
			for p, v := range tree {
				wantTree[filepath.ToSlash(filepath.Join(tc.under, p))] = v
			}
			if tc.under != "" {
				wantTree["models"], wantTree["models/llama"] = "dir", "dir"
			}
			if diff := cmp.Diff(wantTree, s.tree(t)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			a, errA := os.Stat(filepath.Join(s.dir, tc.under, "copy.safetensors"))
			b, errB := os.Stat(filepath.Join(s.dir, tc.under, "weights/model.safetensors"))
			if errA != nil || errB != nil || !os.SameFile(a, b) {
				t.Errorf("copy.safetensors is not a hard link to weights/model.safetensors (%v, %v)", errA, errB)
			}
			if left := s.tempFiles(t); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
			s.checkOutside(t)
		})
	}
}

func TestExtractNames(t *testing.T) {
	s := newSandbox(t)
	_, err := extract(t, s, makeTar(t,
		file("/abs/file", "a"),
		file("./rel", "b"),
		file("/./x", "c"),
		file("//double", "d"),
		file("././twice", "e"),
		file("dup", "first"),
		file("dup", "second"),
	), loader.ArchiveTar, "", Options{})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	want := map[string]string{
		"abs":      "dir",
		"abs/file": "file -rw-r--r-- a",
		"rel":      "file -rw-r--r-- b",
		"x":        "file -rw-r--r-- c",
		"double":   "file -rw-r--r-- d",
		"twice":    "file -rw-r--r-- e",
		"dup":      "file -rw-r--r-- second",
	}
	if diff := cmp.Diff(want, s.tree(t)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	s.checkOutside(t)
}

func TestExtractModes(t *testing.T) {
	tests := map[string]struct {
		mode int64
		want os.FileMode
	}{
		"setuid":          {mode: 0o4755, want: 0o755},
		"setgid":          {mode: 0o2755, want: 0o755},
		"sticky":          {mode: 0o1644, want: 0o644},
		"world writable":  {mode: 0o777, want: 0o755},
		"group writable":  {mode: 0o664, want: 0o644},
		"private":         {mode: 0o600, want: 0o644},
		"others may exec": {mode: 0o601, want: 0o755},
		"no bits":         {mode: 0o000 | 0o10000, want: 0o644},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			got, err := extract(t, s, makeTar(t, tarEntry{name: "bin", body: "x", mode: tc.mode}), loader.ArchiveTar, "", Options{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if len(got) != 1 || got[0].Mode != tc.want {
				t.Errorf("entries = %+v, want mode %v", got, tc.want)
			}
			fi, err := os.Stat(filepath.Join(s.dir, "bin"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != tc.want {
				t.Errorf("file mode = %v, want %v", fi.Mode(), tc.want)
			}
		})
	}
}

func TestExtractWhiteouts(t *testing.T) {
	s := newSandbox(t)
	if err := os.WriteFile(filepath.Join(s.dir, "before"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "e/old"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := extract(t, s, makeTar(t,
		file("d/x", "x"),
		file("d/y", "y"),
		file("d/.wh.x", ""),
		file("gone/deep/f", "f"),
		file(".wh.gone", ""),
		file("e/a", "a"),
		file("e/sub/b", "b"),
		file("e/.wh..wh..opq", ""),
		file("e/c", "c"),
		file(".wh.before", ""),
		file("e/.wh.old", ""),
		file(".wh..wh.plnk", ""),
		file(".wh.never-there", ""),
	), loader.ArchiveTar, "", Options{})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	wantEntries := []Entry{
		{Path: "d/y", Type: TypeFile, Size: 1, Mode: 0o644, SHA256: sum("y")},
		{Path: "e/c", Type: TypeFile, Size: 1, Mode: 0o644, SHA256: sum("c")},
	}
	if diff := cmp.Diff(wantEntries, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	wantTree := map[string]string{
		"before": "file -rw-r--r-- mine", // not created by this extraction
		"d":      "dir",
		"d/y":    "file -rw-r--r-- y",
		"e":      "dir",
		"e/old":  "dir",
		"e/c":    "file -rw-r--r-- c",
	}
	if diff := cmp.Diff(wantTree, s.tree(t)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	s.checkOutside(t)
}

func TestExtractArguments(t *testing.T) {
	tests := map[string]struct {
		format loader.Archive
		under  string
		opts   Options
	}{
		"no format":            {format: loader.ArchiveNone},
		"zip":                  {format: "zip"},
		"under outside":        {format: loader.ArchiveTar, under: "../x"},
		"under absolute":       {format: loader.ArchiveTar, under: "/x"},
		"under the state":      {format: loader.ArchiveTar, under: ".modelgate"},
		"temp dir absolute":    {format: loader.ArchiveTar, opts: Options{TempDir: "/tmp"}},
		"temp dir outside":     {format: loader.ArchiveTar, opts: Options{TempDir: "../tmp"}},
		"temp dir not clean":   {format: loader.ArchiveTar, opts: Options{TempDir: "a//b"}},
		"temp dir is the root": {format: loader.ArchiveTar, opts: Options{TempDir: "."}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t)
			_, err := extract(t, s, makeTar(t, file("a", "a")), tc.format, tc.under, tc.opts)
			if !errors.Is(err, loader.ErrInvalid) {
				t.Fatalf("Extract: %v, want ErrInvalid", err)
			}
			s.checkOutside(t)
		})
	}
}
