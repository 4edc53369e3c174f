package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testTensor is a tensor for safetensorsFile.
type testTensor struct {
	Name  string
	DType string
	Shape []uint64
}

// safetensorsFile makes a valid safetensors file of tensors, in order,
// their bytes counting up, the header padded with spaces to 8 bytes as
// the safetensors library writes it.
func safetensorsFile(t testing.TB, meta map[string]string, tensors ...testTensor) []byte {
	t.Helper()
	header := map[string]any{}
	if meta != nil {
		header["__metadata__"] = meta
	}
	var off uint64
	for _, tt := range tensors {
		size, ok := tensorInfo{DType: tt.DType, Shape: tt.Shape}.size()
		if !ok {
			t.Fatalf("tensor %s: bad size", tt.Name)
		}
		header[tt.Name] = map[string]any{"dtype": tt.DType, "shape": tt.Shape, "data_offsets": []uint64{off, off + size}}
		off += size
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	if pad := len(h) % 8; pad != 0 {
		h = append(h, strings.Repeat(" ", 8-pad)...)
	}
	data := make([]byte, off)
	for i := range data {
		data[i] = byte(i)
	}
	return rawSafetensors(string(h), data)
}

// rawSafetensors makes a safetensors file of a header and data as given.
func rawSafetensors(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// tinyModel is the files of a small valid model.
func tinyModel(t testing.TB) map[string][]byte {
	return map[string][]byte{
		"config.json": []byte(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}`),
		"model.safetensors": safetensorsFile(t, map[string]string{"format": "pt"},
			testTensor{"model.embed_tokens.weight", "BF16", []uint64{4, 8}},
			testTensor{"lm_head.weight", "F32", []uint64{8}}),
	}
}

// writeFiles writes files (by slash-separated name) into dir.
func writeFiles(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeSnapshot lays files out in the hub cache as huggingface_hub does:
// models--org--name/blobs/<sha256>, and snapshots/<commit>/<name> as
// relative links to the blobs. It returns the snapshot directory.
func writeSnapshot(t testing.TB, cache, repo, commit string, files map[string][]byte) string {
	t.Helper()
	repoDir := filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
	snap := filepath.Join(repoDir, "snapshots", commit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		sum := sha256.Sum256(b)
		blob := hex.EncodeToString(sum[:])
		writeFiles(t, filepath.Join(repoDir, "blobs"), map[string][]byte{blob: b})
		link := filepath.Join(snap, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		target, err := filepath.Rel(filepath.Dir(link), filepath.Join(repoDir, "blobs", blob))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// writeRef writes refs/<ref> of repo in the hub cache, holding content.
func writeRef(t testing.TB, cache, repo, ref, content string) {
	t.Helper()
	repoDir := "models--" + strings.ReplaceAll(repo, "/", "--")
	writeFiles(t, cache, map[string][]byte{repoDir + "/refs/" + ref: []byte(content)})
}

// chmodX makes a file executable.
func chmodX(p string) error { return os.Chmod(p, 0o755) }
