package loader

import (
	"encoding/hex"
	"hash/crc32"
	"testing"

	"github.com/minio/crc64nvme"
)

// One digest per file: the cheapest the source vouches for, and none when
// it vouches for nothing Load knows.
func TestCheapest(t *testing.T) {
	all := []Digest{{Algorithm: MD5}, {Algorithm: SHA256}, {Algorithm: GitSHA1}, {Algorithm: SHA1}, {Algorithm: CRC32}, {Algorithm: CRC64NVME}, {Algorithm: CRC32C}}
	for want := range len(known) {
		// Drop the cheaper ones one by one: the next is chosen.
		f := &File{Digests: all[:len(all)-want]}
		got, ok := cheapest(f)
		if !ok || got != known[want] {
			t.Errorf("listing %v: chose %q, want %q", f.Digests, got, known[want])
		}
		if s := newHashSet(f); len(s.algs) != 1 || s.algs[0] != known[want] {
			t.Errorf("listing %v: computes %v, want %s alone", f.Digests, s.algs, known[want])
		}
	}
	if s := newHashSet(&File{Digests: []Digest{{Algorithm: "blake3"}}}); len(s.hs) != 0 {
		t.Errorf("an unknown algorithm alone: computes %v, want nothing", s.algs)
	}
}

// The CRCs are big-endian hex of the checksum, as S3 and GCS publish them.
func TestCRCDigests(t *testing.T) {
	data := []byte("modelgate")
	be := func(v uint64, n int) string {
		b := make([]byte, n)
		for i := range n {
			b[n-1-i] = byte(v >> (8 * i))
		}
		return hex.EncodeToString(b)
	}
	for a, want := range map[Algorithm]string{
		CRC32C:    be(uint64(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))), 4),
		CRC32:     be(uint64(crc32.ChecksumIEEE(data)), 4),
		CRC64NVME: be(crc64nvme.Checksum(data), 8),
	} {
		s := newHashSet(&File{Size: int64(len(data)), Digests: []Digest{{Algorithm: a}}})
		s.Write(data[:4])
		s.Write(data[4:])
		if got := s.Sums()[0].Hex; got != want {
			t.Errorf("%s = %s, want %s", a, got, want)
		}
	}
}

// A CRC over A then B is the combination of A's and B's, for every CRC the
// loader verifies and lengths around the matrices' bit steps.
func TestCRCCombine(t *testing.T) {
	data := make([]byte, 70_000)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	for a, k := range crcKinds {
		for _, cut := range []int{0, 1, 2, 3, 4, 7, 8, 9, 255, 256, 4096, 65_537, len(data) - 1, len(data)} {
			whole := k.update(0, data)
			got := k.combine(k.update(0, data[:cut]), k.update(0, data[cut:]), int64(len(data)-cut))
			if got != whole {
				t.Errorf("%s cut at %d: combined %x, whole %x", a, cut, got, whole)
			}
		}
		// Many parts, in order, as the loader combines them.
		h := &crcHash{k: k}
		for off := 0; off < len(data); off += 1000 {
			end := min(off+1000, len(data))
			h.appendSum(k.update(0, data[off:end]), int64(end-off))
		}
		if h.crc != k.update(0, data) {
			t.Errorf("%s: parts combined %x, whole %x", a, h.crc, k.update(0, data))
		}
		// The saved state restores only into the same width.
		st, _ := h.MarshalBinary()
		back := &crcHash{k: k}
		if err := back.UnmarshalBinary(st); err != nil || back.crc != h.crc {
			t.Errorf("%s: state round trip %x, %v", a, back.crc, err)
		}
	}
}

// BenchmarkCRCCombine is what combining one part's CRC costs.
func BenchmarkCRCCombine(b *testing.B) {
	for a, k := range crcKinds {
		b.Run(string(a), func(b *testing.B) {
			for b.Loop() {
				k.combine(0x1234, 0x5678, 16<<20)
			}
		})
	}
}
