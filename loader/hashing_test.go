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
