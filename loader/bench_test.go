package loader_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// benchModel is a 256 MiB model in four files; `make bench-loader` runs
// the 2 GiB one through the real binary.
func benchModel() map[string]loadertest.Content {
	files := map[string]loadertest.Content{}
	for i := range 4 {
		files[fmt.Sprintf("model-%05d.safetensors", i)] = loadertest.Generated(uint64(i), 64*mib)
	}
	return files
}

// BenchmarkLoad loads the model into a new directory each iteration;
// BenchmarkFloor copies the same bytes from the same server to the same
// disk with one io.Copy per file: the baseline Load is measured against.
func BenchmarkLoad(b *testing.B) {
	files := benchModel()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	src := srv.Source(nil)
	dir := b.TempDir()
	b.SetBytes(total(files))
	b.ResetTimer()
	for i := range b.N {
		dest := filepath.Join(dir, fmt.Sprint(i))
		if _, err := loader.Load(context.Background(), src, loader.Options{Dest: dest, URI: "bench"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = os.RemoveAll(dest)
		b.StartTimer()
	}
}

func BenchmarkFloor(b *testing.B) {
	files := benchModel()
	srv := loadertest.NewServer(files)
	defer srv.Close()
	client := &http.Client{}
	dir := b.TempDir()
	b.SetBytes(total(files))
	b.ResetTimer()
	for i := range b.N {
		dest := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(dest, 0o755); err != nil {
			b.Fatal(err)
		}
		for name := range files {
			resp, err := client.Get(srv.URL() + "/files/" + name)
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Create(filepath.Join(dest, name))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = os.RemoveAll(dest)
		b.StartTimer()
	}
}

func total(files map[string]loadertest.Content) int64 {
	var n int64
	for _, c := range files {
		n += c.Size()
	}
	return n
}
