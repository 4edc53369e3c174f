package s3

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/minio/crc64nvme"

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
// does not match the checksum the store lists: the cheapest one it lists
// is the one checked, so a wrong CRC64NVME beside a right SHA-256 fails.
func TestLoadWrongChecksum(t *testing.T) {
	data := pseudoRandom(2048)
	other := sha256.Sum256([]byte("other content"))
	right := sha256.Sum256(data)
	for name, headers := range map[string]map[string]string{
		"sha256":    {"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(other[:])},
		"crc64nvme": {"x-amz-checksum-crc64nvme": crc64B64([]byte("other content")), "x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(right[:])},
	} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, nil)
			st.put(t, "m/w.bin", data, headers)
			_, err := loader.Load(context.Background(), st.source(t, "m", nil),
				loader.Options{Dest: t.TempDir(), URI: "s3://models/m", PartSize: 1024})
			if !errors.Is(err, loader.ErrVerification) {
				t.Fatalf("got %v, want %v", err, loader.ErrVerification)
			}
		})
	}
}

// TestLoadCRC64NVME loads objects that list the checksum S3 computes for
// every new upload beside their SHA-256: the manifest records the CRC64NVME,
// the one digest the loader computed and verified.
func TestLoadCRC64NVME(t *testing.T) {
	st := newStore(t, nil)
	data := pseudoRandom(10_000)
	sum := sha256.Sum256(data)
	st.put(t, "m/model.safetensors", data, map[string]string{"x-amz-checksum-crc64nvme": crc64B64(data),
		"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sum[:])})
	dest := t.TempDir()
	res, err := loader.Load(context.Background(), st.source(t, "m", nil),
		loader.Options{Dest: dest, URI: "s3://models/m", PartSize: 1024, Concurrency: 4})
	if err != nil || res.Verified != 1 {
		t.Fatalf("Load: %+v, %v", res, err)
	}
	b, err := os.ReadFile(filepath.Join(dest, loader.StateDir, loader.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m loader.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	c := crc64nvme.New()
	c.Write(data)
	want := []loader.Digest{{Algorithm: loader.CRC64NVME, Hex: hex.EncodeToString(c.Sum(nil))}}
	if diff := cmp.Diff(want, m.Files[0].Digests); diff != "" || !m.Files[0].Verified {
		t.Errorf("manifest digests (-want +got):\n%s (verified %v)", diff, m.Files[0].Verified)
	}
}

// crc64B64 is the x-amz-checksum-crc64nvme header of data.
func crc64B64(data []byte) string {
	c := crc64nvme.New()
	c.Write(data)
	return base64.StdEncoding.EncodeToString(c.Sum(nil))
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
