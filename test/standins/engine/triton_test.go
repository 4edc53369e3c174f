package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadRepositories(t *testing.T) {
	weights := tinyModel(t)["model.safetensors"]
	tests := map[string]struct {
		files   map[string][]byte
		want    []string // the models loaded
		wantErr string
	}{
		"models with versions": {
			files: map[string][]byte{"a/config.pbtxt": []byte("backend: \"onnxruntime\""), "a/1/model.onnx": []byte("onnx"),
				"b/2/model.safetensors": weights, "b/3/model.safetensors": weights},
			want: []string{"a", "b"},
		},
		"files at the top and Triton's own folders are no models": {
			files: map[string][]byte{"config.json": []byte("{}"), "op_defs/x": nil, "graphs/y": nil, "resource/z": nil, "a/1/model.onnx": nil},
			want:  []string{"a"},
		},
		"a model without a version": {
			files:   map[string][]byte{"a/config.pbtxt": nil, "a/model.onnx": nil},
			wantErr: "failed to load 'a': at least one version must be available under the version policy of model 'a'",
		},
		"a hidden folder is a model too, as in Triton": {
			files:   map[string][]byte{"a/1/model.onnx": nil, ".modelgate/manifest.json": []byte("{}")},
			wantErr: "failed to load '.modelgate': at least one version",
		},
		"a bad safetensors file": {
			files:   map[string][]byte{"a/1/model.safetensors": []byte("short")},
			wantErr: "failed to load 'a': 1/model.safetensors:",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			repo := t.TempDir()
			writeFiles(t, repo, tc.files)
			models, err := readRepositories(context.Background(), []string{repo}, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, slices.Sorted(maps.Keys(models))); diff != "" {
				t.Errorf("models (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRepositoriesMissing(t *testing.T) {
	_, err := readRepositories(context.Background(), []string{t.TempDir() + "/none"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "model repository") {
		t.Errorf("error %v, want the repository named", err)
	}
}
