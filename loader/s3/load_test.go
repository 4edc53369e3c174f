package s3

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

// TestLoad runs the loader on the source: every file arrives whole,
// fetched in many ranged parts, and verified against the digests the
// store vouched for.
func TestLoad(t *testing.T) {
	st := newStore(t, nil)
	files := map[string][]byte{
		"config.json":               []byte(`{"layers": 2}`),
		"model.safetensors":         pseudoRandom(10_000),
		"tokenizer/tokenizer.model": pseudoRandom(3_000)[1000:],
	}
	for name, data := range files {
		sum := sha256.Sum256(data)
		st.put(t, "org/model/"+name, data, map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sum[:])})
	}
	st.put(t, "org/model-instruct/config.json", []byte("another model"), nil)
	dest := t.TempDir()
	res, err := loader.Load(context.Background(), st.source(t, "org/model", nil),
		loader.Options{Dest: dest, URI: "s3://models/org/model", PartSize: 1024, Concurrency: 4})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if res.Files != len(files) || res.Verified != len(files) {
		t.Errorf("%d files, %d verified, want %d and %d", res.Files, res.Verified, len(files), len(files))
	}
	got := map[string][]byte{}
	for name := range files {
		b, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = b
	}
	if diff := cmp.Diff(files, got); diff != "" {
		t.Errorf("loaded files (-want +got):\n%s", diff)
	}
}

// TestLoadWrongChecksum checks that the loader fails on content that
// does not match the checksum the store lists.
func TestLoadWrongChecksum(t *testing.T) {
	st := newStore(t, nil)
	other := sha256.Sum256([]byte("other content"))
	st.put(t, "m/w.bin", pseudoRandom(2048), map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(other[:])})
	_, err := loader.Load(context.Background(), st.source(t, "m", nil),
		loader.Options{Dest: t.TempDir(), URI: "s3://models/m", PartSize: 1024})
	if !errors.Is(err, loader.ErrVerification) {
		t.Fatalf("got %v, want %v", err, loader.ErrVerification)
	}
}

// pseudoRandom returns n bytes that do not repeat: a misplaced range
// shows.
func pseudoRandom(n int) []byte {
	var data []byte
	for h := sha256.Sum256(nil); len(data) < n; h = sha256.Sum256(h[:]) {
		data = append(data, h[:]...)
	}
	return data[:n]
}
