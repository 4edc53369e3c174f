package loadertest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// TestSafetensors reads the generated file as the format says: an 8-byte
// little-endian header length, a JSON header whose one tensor covers the
// rest exactly, for sizes around the points where the header grows.
func TestSafetensors(t *testing.T) {
	for _, size := range []int64{128, 1000, 1 << 20, 3<<20 + 4321, 1<<30 + 7} {
		c := Safetensors(9, size)
		if c.Size() != size {
			t.Fatalf("size %d: Size() = %d", size, c.Size())
		}
		var lenBuf [8]byte
		if _, err := c.ReadAt(lenBuf[:], 0); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		hl := int64(binary.LittleEndian.Uint64(lenBuf[:]))
		if hl%8 != 0 {
			t.Errorf("size %d: header length %d is not a multiple of 8", size, hl)
		}
		header := make([]byte, hl)
		if _, err := c.ReadAt(header, 8); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		var h map[string]json.RawMessage
		if err := json.Unmarshal(header, &h); err != nil {
			t.Fatalf("size %d: header %q: %v", size, header, err)
		}
		var w struct {
			Dtype   string  `json:"dtype"`
			Shape   []int64 `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(h["weight"], &w); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		data := size - 8 - hl
		if w.Dtype != "U8" || len(w.Shape) != 1 || w.Shape[0] != data || w.Offsets[0] != 0 || w.Offsets[1] != data {
			t.Errorf("size %d: tensor %+v does not cover the %d data bytes", size, w, data)
		}
		// The generated part reads through to the end, from any offset.
		tail := make([]byte, 100)
		n, err := c.ReadAt(tail, size-50)
		if n != 50 || !errors.Is(err, io.EOF) {
			t.Errorf("size %d: reading the last 50 bytes: %d, %v", size, n, err)
		}
	}
	if Safetensors(1, 4096).SHA256() == Safetensors(2, 4096).SHA256() {
		t.Error("different seeds give the same content")
	}
}
