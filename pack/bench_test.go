package pack

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPack measures packing a 256 MiB model (four 60 MiB weight
// files and sixteen of 1 MiB). build+push is the whole of it: Build (the
// files read and hashed) and Push into a fresh in-process registry each
// time (the files read again, streamed, uploaded and verified); the
// registry, in this process, buffers and hashes every upload too, so its
// cost is in the figure. build is the hashing pass alone. The bytes/s
// are the model's.
func BenchmarkPack(b *testing.B) {
	dir := b.TempDir()
	nodes := map[string]node{}
	var size int64
	for i := range 4 {
		nodes[fmt.Sprintf("model-%05d-of-00004.safetensors", i+1)] = node{size: 60 << 20, seed: uint64(i)}
		size += 60 << 20
	}
	for i := range 16 {
		nodes[fmt.Sprintf("tokenizer/part-%02d.json", i)] = node{size: 1 << 20, seed: uint64(100 + i)}
		size += 1 << 20
	}
	writeTree(b, dir, nodes)

	b.Run("build", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Build(context.Background(), dir, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("build+push", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			tag := tagOf(b, newRegistry(b, nil)+"/models/bench:v1")
			b.StartTimer()
			idx, err := Build(context.Background(), dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := Push(context.Background(), idx, tag, anonymous); err != nil {
				b.Fatal(err)
			}
		}
	})
}
