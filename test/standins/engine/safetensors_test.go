package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckSafetensors(t *testing.T) {
	valid := safetensorsFile(t, map[string]string{"format": "pt"},
		testTensor{"embed.weight", "F16", []uint64{2, 3}},
		testTensor{"step", "I64", []uint64{}},
		testTensor{"packed", "F4", []uint64{4}},
		testTensor{"empty", "F32", []uint64{0, 5}})
	// header writes a file whose header is h, with n bytes of data.
	header := func(h string, n int) []byte { return rawSafetensors(h, make([]byte, n)) }
	tests := map[string]struct {
		file    []byte
		want    *stHeader
		wantErr error
	}{
		"valid": {
			file: valid,
			want: &stHeader{
				Tensors: map[string]tensorInfo{
					"embed.weight": {DType: "F16", Shape: []uint64{2, 3}, Offsets: [2]uint64{0, 12}},
					"step":         {DType: "I64", Shape: []uint64{}, Offsets: [2]uint64{12, 20}},
					"packed":       {DType: "F4", Shape: []uint64{4}, Offsets: [2]uint64{20, 22}},
					"empty":        {DType: "F32", Shape: []uint64{0, 5}, Offsets: [2]uint64{22, 22}},
				},
				Metadata: map[string]string{"format": "pt"},
				DataLen:  22,
			},
		},
		"no tensors": {
			file: header("{}", 0),
			want: &stHeader{Tensors: map[string]tensorInfo{}},
		},
		"tensors in any order in the header": {
			file: header(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 2),
			want: &stHeader{Tensors: map[string]tensorInfo{
				"a": {DType: "U8", Shape: []uint64{1}, Offsets: [2]uint64{0, 1}},
				"b": {DType: "U8", Shape: []uint64{1}, Offsets: [2]uint64{1, 2}},
			}, DataLen: 2},
		},
		"empty file":                 {file: nil, wantErr: errHeaderLength},
		"header length too large":    {file: binary.LittleEndian.AppendUint64(nil, maxHeader+1), wantErr: errHeaderLength},
		"header length past the end": {file: append(binary.LittleEndian.AppendUint64(nil, 1000), "{}"...), wantErr: errHeaderLength},
		"not JSON":                   {file: header("{not json", 0), wantErr: errHeader},
		"not an object":              {file: header("[]", 0), wantErr: errHeader},
		"not UTF-8":                  {file: header("{\"\xff\":1}", 0), wantErr: errHeader},
		"no dtype":                   {file: header(`{"t":{"shape":[1],"data_offsets":[0,1]}}`, 1), wantErr: errHeader},
		"a field name in other case": {file: header(`{"t":{"DTYPE":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), wantErr: errHeader},
		"unknown dtype":              {file: header(`{"t":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, 16), wantErr: errHeader},
		"negative shape":             {file: header(`{"t":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, 1), wantErr: errHeader},
		"three offsets":              {file: header(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 1), wantErr: errHeader},
		"metadata not strings":       {file: header(`{"__metadata__":{"n":1}}`, 0), wantErr: errHeader},
		"truncated data":             {file: valid[:len(valid)-4], wantErr: errTruncated},
		"offsets past the data":      {file: header(`{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, 8), wantErr: errTruncated},
		"a gap between tensors": {
			file:    header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, 3),
			wantErr: errOffsets,
		},
		"overlapping tensors": {
			file:    header(`{"a":{"dtype":"U16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"U16","shape":[1],"data_offsets":[1,3]}}`, 3),
			wantErr: errOffsets,
		},
		"end before begin":       {file: header(`{"t":{"dtype":"U8","shape":[0],"data_offsets":[1,0]}}`, 1), wantErr: errOffsets},
		"bytes after the last":   {file: header(`{"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 2), wantErr: errOffsets},
		"size mismatch":          {file: header(`{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), wantErr: errTensorSize},
		"not a whole byte":       {file: header(`{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}`, 1), wantErr: errTensorSize},
		"a shape that overflows": {file: header(`{"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0), wantErr: errTensorSize},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := checkSafetensors(context.Background(), bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckSafetensorsReadsToTheEnd checks that the data is read, not
// only sized: a file that ends before the size it was opened with (one
// being written, or truncated under the reader) fails.
func TestCheckSafetensorsReadsToTheEnd(t *testing.T) {
	file := safetensorsFile(t, nil, testTensor{"t", "F32", []uint64{16}})
	_, err := checkSafetensors(context.Background(), bytes.NewReader(file[:len(file)-1]), int64(len(file)))
	if !errors.Is(err, errTruncated) {
		t.Errorf("error = %v, want %v", err, errTruncated)
	}
}

func TestCheckSafetensorsStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	file := safetensorsFile(t, nil, testTensor{"t", "F32", []uint64{16}})
	if _, err := checkSafetensors(ctx, bytes.NewReader(file), int64(len(file))); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want %v", err, context.Canceled)
	}
}

// FuzzParseHeader checks that any header parseHeader accepts is one the
// tensors cover exactly: each of its size, one after the other.
func FuzzParseHeader(f *testing.F) {
	f.Add(safetensorsFile(f, map[string]string{"format": "pt"},
		testTensor{"model.embed_tokens.weight", "BF16", []uint64{8, 4}},
		testTensor{"model.layers.0.self_attn.q_proj.weight", "BF16", []uint64{4, 4}},
		testTensor{"lm_head.weight", "F32", []uint64{4}}))
	f.Add(safetensorsFile(f, map[string]string{"format": "mlx"}, testTensor{"w", "F8_E4M3", []uint64{3, 3}}, testTensor{"s", "F4", []uint64{2}}))
	f.Add(rawSafetensors(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, make([]byte, 3)))
	f.Add(rawSafetensors("{}", nil))
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := parseHeader(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			return
		}
		var sum uint64
		for name, ti := range h.Tensors {
			size, ok := ti.size()
			if !ok || ti.Offsets[1]-ti.Offsets[0] != size || ti.Offsets[1] > h.DataLen {
				t.Fatalf("tensor %q accepted with %+v in %d bytes of data", name, ti, h.DataLen)
			}
			sum += size
		}
		if sum != h.DataLen {
			t.Fatalf("tensors of %d bytes accepted for %d bytes of data", sum, h.DataLen)
		}
	})
}
