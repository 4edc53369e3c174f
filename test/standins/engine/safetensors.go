package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/modelgate/modelgate/internal/ctxio"
)

// This file checks safetensors files as the safetensors library
// (safetensors/src/tensor.rs) does when an engine loads them: an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's
// dtype, shape and data offsets, then the tensors' bytes, which the
// tensors must cover exactly, in order and without gaps.

// maxHeader is the longest header the safetensors library reads.
const maxHeader = 100_000_000

// Errors of safetensors files, by what is wrong.
var (
	errHeaderLength = errors.New("bad header length")
	errHeader       = errors.New("bad header")
	errOffsets      = errors.New("bad data offsets")
	errTensorSize   = errors.New("tensor size does not match its dtype and shape")
	errTruncated    = errors.New("file truncated")
)

// dtypeBits is the width in bits of each element type safetensors knows.
var dtypeBits = map[string]uint64{
	"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
	"F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
	"I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
	"C64": 64, "F64": 64, "I64": 64, "U64": 64,
}

// tensorInfo is a tensor's entry in a safetensors header.
type tensorInfo struct {
	DType   string
	Shape   []uint64
	Offsets [2]uint64 // begin and end, in the data section
}

// stHeader is a safetensors file's header, checked against the file's
// size.
type stHeader struct {
	Tensors  map[string]tensorInfo
	Metadata map[string]string
	DataLen  uint64 // the data section's length
}

// parseHeader reads and checks the header of a safetensors file of size
// bytes from r, leaving r at the data section.
func parseHeader(r io.Reader, size int64) (*stHeader, error) {
	var lenBuf [8]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("%w: reading it: %w", errHeaderLength, err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n > maxHeader:
		return nil, fmt.Errorf("%w: %d is over the limit of %d bytes", errHeaderLength, n, maxHeader)
	case size < 8 || n > uint64(size-8):
		return nil, fmt.Errorf("%w: %d is past the end of the %d-byte file", errHeaderLength, n, size)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: reading it: %w", errHeader, err)
	}
	h, err := decodeHeader(buf)
	if err != nil {
		return nil, err
	}
	h.DataLen = uint64(size) - 8 - n
	return h, h.check()
}

// decodeHeader decodes a header's JSON as serde does in the safetensors
// library: every field of a tensor is required, and the dtype must be
// known.
func decodeHeader(buf []byte) (*stHeader, error) {
	if !utf8.Valid(buf) {
		return nil, fmt.Errorf("%w: not UTF-8", errHeader)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(buf, &raw); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %w", errHeader, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: not a JSON object", errHeader)
	}
	h := &stHeader{Tensors: make(map[string]tensorInfo, len(raw))}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		v := raw[name]
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &h.Metadata); err != nil {
				return nil, fmt.Errorf("%w: __metadata__ must map strings to strings: %w", errHeader, err)
			}
			continue
		}
		t, err := decodeTensor(v)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %w", errHeader, name, err)
		}
		h.Tensors[name] = t
	}
	return h, nil
}

// decodeTensor decodes a tensor's entry. The field names are matched
// exactly, as serde does (encoding/json would match them in any case).
func decodeTensor(v json.RawMessage) (tensorInfo, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(v, &fields); err != nil || fields == nil {
		return tensorInfo{}, fmt.Errorf("not an object")
	}
	var t tensorInfo
	var offsets []uint64
	for _, f := range []struct {
		key string
		dst any
	}{{"dtype", &t.DType}, {"shape", &t.Shape}, {"data_offsets", &offsets}} {
		raw, ok := fields[f.key]
		if !ok || string(raw) == "null" {
			return t, fmt.Errorf("no %s", f.key)
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return t, fmt.Errorf("%s: %w", f.key, err)
		}
	}
	switch {
	case dtypeBits[t.DType] == 0:
		return t, fmt.Errorf("unknown dtype %q", t.DType)
	case len(offsets) != 2:
		return t, fmt.Errorf("data_offsets must be [begin, end]")
	}
	t.Offsets = [2]uint64(offsets)
	return t, nil
}

// check checks, as the safetensors library's Metadata::validate does,
// that the tensors, by offset, follow one another from the data section's
// start, each of the size its dtype and shape give, and end at its end.
func (h *stHeader) check() error {
	names := slices.SortedFunc(maps.Keys(h.Tensors), func(a, b string) int {
		x, y := h.Tensors[a].Offsets, h.Tensors[b].Offsets
		return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]), strings.Compare(a, b))
	})
	var end uint64
	for _, name := range names {
		t := h.Tensors[name]
		b, e := t.Offsets[0], t.Offsets[1]
		if b != end || e < b {
			return fmt.Errorf("%w: tensor %q has [%d, %d], where the previous tensor ends at %d", errOffsets, name, b, e, end)
		}
		size, ok := t.size()
		if !ok {
			return fmt.Errorf("%w: tensor %q: %s%v is not a whole number of bytes, or overflows", errTensorSize, name, t.DType, t.Shape)
		}
		if e-b != size {
			return fmt.Errorf("%w: tensor %q: %s%v is %d bytes, its data_offsets [%d, %d] hold %d", errTensorSize, name, t.DType, t.Shape, size, b, e, e-b)
		}
		end = e
	}
	switch {
	case end > h.DataLen:
		return fmt.Errorf("%w: the tensors need %d bytes after the header, the file has %d", errTruncated, end, h.DataLen)
	case end < h.DataLen:
		return fmt.Errorf("%w: %d bytes after the last tensor", errOffsets, h.DataLen-end)
	}
	return nil
}

// size is a tensor's size in bytes; false if it overflows or is not a
// whole number of bytes.
func (t tensorInfo) size() (uint64, bool) {
	n := uint64(1)
	for _, d := range append(slices.Clone(t.Shape), dtypeBits[t.DType]) {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n / 8, n%8 == 0
}

// readSafetensors checks the safetensors file at path and reads all its
// tensors' bytes, so that a file shorter than its header says, or one
// that cannot be read to the end, fails here as it would in the engine.
func readSafetensors(ctx context.Context, path string) (*stHeader, int64, error) {
	f, err := os.Open(path) //nolint:gosec // a file of the model directory the engine serves, as the real engine opens it
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	h, err := checkSafetensors(ctx, f, fi.Size())
	return h, fi.Size(), err
}

// checkSafetensors checks a safetensors file of size bytes read from r,
// reading it to its end.
func checkSafetensors(ctx context.Context, r io.Reader, size int64) (*stHeader, error) {
	h, err := parseHeader(r, size)
	if err != nil {
		return nil, err
	}
	// The struct hides io.Discard's ReadFrom, whose 8 KiB reads are slow
	// for gigabytes.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, ctxio.Reader(ctx, r), make([]byte, 1<<20))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading tensor data: %w", err)
	case uint64(n) != h.DataLen: //nolint:gosec // a count of bytes copied, never negative
		return nil, fmt.Errorf("%w: read %d bytes of tensor data, the header needs %d", errTruncated, n, h.DataLen)
	}
	return h, nil
}
