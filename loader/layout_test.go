package loader_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

func TestHFCacheLayout(t *testing.T) {
	files := model()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	src := srv.Source(nil)
	commit := strings.Repeat("0e9e39f2", 5)
	src.HF = &loader.HFRepo{ID: "meta-llama/Llama-3.1-8B-Instruct", Ref: "v1.0", Commit: commit}
	dest := t.TempDir()
	if _, err := loader.Load(context.Background(), src, fastOptions(dest, "hf://meta-llama/Llama-3.1-8B-Instruct@v1.0")); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(dest, loader.HFCacheDir, "models--meta-llama--Llama-3.1-8B-Instruct")
	for _, ref := range []string{"main", "v1.0"} {
		b, err := os.ReadFile(filepath.Join(repo, "refs", ref))
		if err != nil || string(b) != commit {
			t.Errorf("refs/%s = %q, %v; want the commit %s", ref, b, err, commit)
		}
	}
	for p, c := range files {
		// As huggingface_hub finds it: snapshots/<commit>/<path>, a link
		// into blobs/<etag>.
		snap := filepath.Join(repo, "snapshots", commit, p)
		link, err := os.Readlink(snap)
		if err != nil {
			t.Fatalf("%s: %v", snap, err)
		}
		if filepath.IsAbs(link) || filepath.Base(link) != c.SHA256() {
			t.Errorf("%s links to %q, want a relative link to blobs/%s", p, link, c.SHA256())
		}
		if got := fileSHA(t, snap); got != c.SHA256() {
			t.Errorf("snapshot %s has sha256 %s, want %s", p, got, c.SHA256())
		}
	}
	// The plain view: the mount path as a model directory.
	if diff := cmp.Diff(want(files), sums(t, dest)); diff != "" {
		t.Errorf("plain view (-want +got):\n%s", diff)
	}
	m := readManifest(t, dest)
	if m.Layout != loader.LayoutHFCache || m.HF == nil || m.HF.Commit != commit || m.Revision != "test" {
		t.Errorf("manifest = %+v", m)
	}
}

func fileSHA(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return loadertest.Bytes(b).SHA256()
}

// listing is a source whose listing is given, reading from a real server.
type listing struct {
	*loadertest.Source
	edit func(*loader.Listing)
}

func (l listing) List(ctx context.Context) (*loader.Listing, error) {
	li, err := l.Source.List(ctx)
	if err != nil {
		return nil, err
	}
	l.edit(li)
	return li, nil
}

func TestUnsafeListings(t *testing.T) {
	tests := map[string]struct {
		edit func(*loader.Listing)
		kind error
		msg  string
	}{
		"parent directory": {edit: rename("../escape.bin"), kind: loader.ErrInvalid, msg: `"../escape.bin"`},
		"absolute":         {edit: rename("/etc/passwd"), kind: loader.ErrInvalid, msg: "must be relative"},
		"inner parent":     {edit: rename("a/../../b"), kind: loader.ErrInvalid, msg: `".."`},
		"the manifest":     {edit: rename(".modelgate/manifest.json"), kind: loader.ErrInvalid, msg: "keeps for itself"},
		"the hf cache":     {edit: rename(".cache/huggingface/hub/x"), kind: loader.ErrInvalid, msg: "keeps for itself"},
		"backslash":        {edit: rename(`..\..\x`), kind: loader.ErrInvalid, msg: "backslash"},
		"twice": {edit: func(l *loader.Listing) {
			l.Files = append(l.Files, l.Files[0])
		}, kind: loader.ErrInvalid, msg: "listed twice"},
		"file and directory": {edit: func(l *loader.Listing) {
			f := l.Files[0]
			f.Path = "tokenizer"
			l.Files = append(l.Files, f)
		}, kind: loader.ErrInvalid, msg: "both a file and the directory"},
		"empty":   {edit: func(l *loader.Listing) { l.Files = nil }, kind: loader.ErrNotFound, msg: "empty"},
		"no room": {edit: func(l *loader.Listing) { l.Files[0].Size = 1 << 60 }, kind: loader.ErrNoSpace, msg: "free and the model needs"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := loadertest.NewServer(model())
			defer srv.Close()
			parent := t.TempDir()
			dest := filepath.Join(parent, "dest")
			_, err := loader.Load(context.Background(), listing{srv.Source(nil), tc.edit}, fastOptions(dest, "s3://b/m"))
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error = %v, want %v mentioning %q", err, tc.kind, tc.msg)
			}
			if srv.Requests() != 0 {
				t.Errorf("%d content requests before the listing was refused", srv.Requests())
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("something was written beside the destination: %v", entries)
			}
		})
	}
}

func rename(p string) func(*loader.Listing) {
	return func(l *loader.Listing) { l.Files[0].Path = p }
}

// TestRefusedArchive: an archive without an extractor is a clear error.
func TestRefusedArchive(t *testing.T) {
	srv := loadertest.NewServer(map[string]loadertest.Content{"layer": loadertest.Generated(1, 100)})
	defer srv.Close()
	src := listing{srv.Source(nil), func(l *loader.Listing) { l.Files[0].Unpack = loader.ArchiveTarGzip; l.Files[0].Path = "" }}
	_, err := loader.Load(context.Background(), src, fastOptions(t.TempDir(), "oci://r/m:v1"))
	if !errors.Is(err, loader.ErrInvalid) || !strings.Contains(err.Error(), "cannot extract") {
		t.Fatalf("error = %v", err)
	}
}

var _ io.Reader = (*os.File)(nil)
