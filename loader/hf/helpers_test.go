package hf

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"testing"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// Test files: small regular ones, and LFS ones larger than a CDN read
// buffer, of odd sizes.
var (
	configJSON = hubtest.File{Path: "config.json", Content: loadertest.Bytes([]byte(`{"model_type": "llama"}` + "\n"))}
	readme     = hubtest.File{Path: "README.md", Content: loadertest.Bytes([]byte("# model\n"))}
	weights    = hubtest.File{Path: "model.safetensors", Content: loadertest.Generated(1, 1<<20+4321), LFS: true}
	tokenizer  = hubtest.File{Path: "tokenizer/tokenizer.json", Content: loadertest.Generated(2, 70_001)}
	shard      = hubtest.File{Path: "onnx/fp16/model.onnx_data", Content: loadertest.Generated(3, 300_007), LFS: true}
)

// newHub starts a fake Hub for the test.
func newHub(t *testing.T, opts ...hubtest.Option) *hubtest.Server {
	t.Helper()
	hub := hubtest.New(opts...)
	t.Cleanup(hub.Close)
	return hub
}

// newSource is a Source for repo@rev on hub, with env besides
// HF_ENDPOINT.
func newSource(t *testing.T, hub *hubtest.Server, repo, rev string, env map[string]string) *Source {
	t.Helper()
	all := map[string]string{"HF_ENDPOINT": hub.URL()}
	maps.Copy(all, env)
	s, err := New(Config{Repo: repo, Revision: rev, Getenv: func(k string) string { return all[k] }, HTTP: hub.Client()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// bytesOf reads a file's whole content.
func bytesOf(t *testing.T, f hubtest.File) []byte {
	t.Helper()
	b, err := io.ReadAll(f.Content.Reader())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// listed is the File a Source should list for f, digests computed here
// rather than by the fake.
func listed(t *testing.T, f hubtest.File) loader.File {
	t.Helper()
	b := bytesOf(t, f)
	if f.LFS {
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		return loader.File{Path: f.Path, Size: int64(len(b)), Digests: []loader.Digest{{Algorithm: loader.SHA256, Hex: h}}, Version: h, Key: f.Path}
	}
	g := sha1.New()
	fmt.Fprintf(g, "blob %d\x00", len(b))
	g.Write(b)
	h := hex.EncodeToString(g.Sum(nil))
	return loader.File{Path: f.Path, Size: int64(len(b)), Digests: []loader.Digest{{Algorithm: loader.GitSHA1, Hex: h}}, Version: h, Key: f.Path}
}

// readRange opens [off, off+n) of f and reads it whole.
func readRange(ctx context.Context, s *Source, f *loader.File, off, n int64) ([]byte, error) {
	rc, err := s.Open(ctx, f, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// fileByPath finds a listed file.
func fileByPath(t *testing.T, l *loader.Listing, p string) *loader.File {
	t.Helper()
	for i := range l.Files {
		if l.Files[i].Path == p {
			return &l.Files[i]
		}
	}
	t.Fatalf("listing has no %s", p)
	return nil
}
