package hf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/hf/hubtest"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// BenchmarkLoad loads four 64 MiB LFS shards and a config through the fake
// Hub and its CDN: the cost of the hf source and the fake on top of the
// loader's own.
func BenchmarkLoad(b *testing.B) {
	hub := hubtest.New()
	defer hub.Close()
	files := []hubtest.File{configJSON}
	var size int64
	for i := range 4 {
		f := hubtest.File{Path: fmt.Sprintf("model-%05d-of-00004.safetensors", i+1), Content: loadertest.Generated(uint64(i), 64<<20), LFS: true}
		files = append(files, f)
		size += f.Content.Size()
	}
	hub.AddRepo("org/model", hubtest.OneCommit(files...))
	client, err := loader.NewHTTPClient(loader.HTTPOptions{Conns: 8})
	if err != nil {
		b.Fatal(err)
	}
	env := map[string]string{"HF_ENDPOINT": hub.URL()}
	s, err := New(Config{Repo: "org/model", Getenv: func(k string) string { return env[k] }, HTTP: client})
	if err != nil {
		b.Fatal(err)
	}
	// The fake hashes the shards once, on the first listing.
	if _, err := s.List(context.Background()); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		dest := filepath.Join(dir, fmt.Sprint(i))
		if _, err := loader.Load(context.Background(), s, loader.Options{Dest: dest, URI: "hf://org/model", Concurrency: 8, Host: "bench"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = os.RemoveAll(dest)
		b.StartTimer()
	}
}
