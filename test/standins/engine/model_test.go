package main

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestReadModel(t *testing.T) {
	tiny := tinyModel(t)
	config := tiny["config.json"]
	shard1 := safetensorsFile(t, nil, testTensor{"a", "F16", []uint64{4}})
	shard2 := safetensorsFile(t, nil, testTensor{"b", "F16", []uint64{2}}, testTensor{"c", "U8", []uint64{3}})
	index := []byte(`{"metadata": {"total_size": 15}, "weight_map": {"a": "model-00001-of-00002.safetensors",
		"b": "model-00002-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}}`)
	size := func(files ...[]byte) (n int64) {
		for _, f := range files {
			n += int64(len(f))
		}
		return n
	}
	tests := map[string]struct {
		files   map[string][]byte
		want    *model
		wantErr error
	}{
		"one file": {
			files: tiny,
			want:  &model{Files: 1, Tensors: 2, Bytes: size(tiny["model.safetensors"]), Architectures: []string{"LlamaForCausalLM"}},
		},
		"shards with an index": {
			files: map[string][]byte{"config.json": config, "model.safetensors.index.json": index,
				"model-00001-of-00002.safetensors": shard1, "model-00002-of-00002.safetensors": shard2},
			want: &model{Files: 2, Tensors: 3, Bytes: size(shard1, shard2), Architectures: []string{"LlamaForCausalLM"}},
		},
		"shards in a folder, named by the index": {
			files: map[string][]byte{"config.json": []byte("{}"), "model.safetensors.index.json": []byte(`{"weight_map": {"a": "w/one.safetensors"}}`),
				"w/one.safetensors": shard1},
			want: &model{Files: 1, Tensors: 1, Bytes: size(shard1)},
		},
		"the index names a missing shard": {
			files: map[string][]byte{"config.json": config, "model.safetensors.index.json": index,
				"model-00001-of-00002.safetensors": shard1},
			wantErr: fs.ErrNotExist,
		},
		"the index maps a tensor to a shard without it": {
			files: map[string][]byte{"config.json": config, "model.safetensors.index.json": index,
				"model-00001-of-00002.safetensors": shard2, "model-00002-of-00002.safetensors": shard1},
			wantErr: errIndex,
		},
		"the index names a file outside": {
			files:   map[string][]byte{"config.json": config, "model.safetensors.index.json": []byte(`{"weight_map": {"a": "../x.safetensors"}}`)},
			wantErr: errIndex,
		},
		"an index without weight_map": {
			files:   map[string][]byte{"config.json": config, "model.safetensors.index.json": []byte(`{}`), "model.safetensors": shard1},
			wantErr: errIndex,
		},
		"no config.json": {
			files:   map[string][]byte{"model.safetensors": shard1},
			wantErr: fs.ErrNotExist,
		},
		"config.json not an object": {
			files:   map[string][]byte{"config.json": []byte(`["llama"]`), "model.safetensors": shard1},
			wantErr: errConfig,
		},
		"config.json null": {
			files:   map[string][]byte{"config.json": []byte(`null`), "model.safetensors": shard1},
			wantErr: errConfig,
		},
		"no safetensors": {
			files:   map[string][]byte{"config.json": config, "pytorch_model.bin": []byte("pickle")},
			wantErr: errNoWeights,
		},
		"a truncated shard": {
			files:   map[string][]byte{"config.json": config, "model.safetensors": shard2[:len(shard2)-1]},
			wantErr: errTruncated,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			got, err := readModel(context.Background(), dir, io.Discard)
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(model{}, "Dir")); diff != "" {
				t.Errorf("model (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadModelFollowsLinks reads a hub cache snapshot, whose files are
// relative links into blobs/, and checks the lines it logs.
func TestReadModelFollowsLinks(t *testing.T) {
	files := tinyModel(t)
	snap := writeSnapshot(t, t.TempDir(), "org/tiny", "0123456789abcdef0123456789abcdef01234567", files)
	if fi, err := os.Lstat(filepath.Join(snap, "model.safetensors")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the snapshot's model.safetensors is not a link: %v", err)
	}
	var log strings.Builder
	got, err := readModel(context.Background(), snap, &log)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(files["model.safetensors"]))
	want := &model{Dir: snap, Files: 1, Tensors: 2, Bytes: n, Architectures: []string{"LlamaForCausalLM"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("model (-want +got):\n%s", diff)
	}
	wantLog := "engine: read model.safetensors: 2 tensors, " + strconv.FormatInt(n, 10) + " bytes\n"
	if diff := cmp.Diff(wantLog, log.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
