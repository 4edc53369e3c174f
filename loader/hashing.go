package loader

import (
	"crypto/md5"  //nolint:gosec // MD5 is what GCS and S3 vouch for; checked, not trusted alone
	"crypto/sha1" //nolint:gosec // git's blob hash, as the Hub lists it
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"slices"
	"strconv"
)

// known are the algorithms Load verifies, cheapest first (measured on one
// core of the 2-core test machine, test/perf/benchloader's hashing figures in
// docs/loader.md): the CRCs run on SSE4.2/PCLMULQDQ instructions at
// several GB/s, SHA-1 and SHA-256 on the SHA extensions, MD5 has none.
var known = []Algorithm{CRC32C, CRC64NVME, CRC32, SHA1, GitSHA1, SHA256, MD5}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hashSet computes one digest of a file: the cheapest that its source
// vouches for (known's order), and none when the source vouches for
// nothing Load knows. Computing more would prove nothing more: the
// source's word is what a digest is checked against.
type hashSet struct {
	algs []Algorithm
	hs   []hash.Hash
}

func newHashSet(f *File) *hashSet {
	s := &hashSet{}
	if a, ok := cheapest(f); ok {
		s.algs = []Algorithm{a}
		s.hs = []hash.Hash{newHash(a, f.Size)}
	}
	return s
}

// cheapest is the cheapest algorithm f's source vouches for.
func cheapest(f *File) (Algorithm, bool) {
	for _, a := range known {
		if slices.ContainsFunc(f.Digests, func(d Digest) bool { return d.Algorithm == a }) {
			return a, true
		}
	}
	return "", false
}

func newHash(a Algorithm, size int64) hash.Hash {
	switch a {
	case GitSHA1:
		h := sha1.New() //nolint:gosec // see import
		h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
		return h
	case SHA1:
		return sha1.New() //nolint:gosec // see import
	case MD5:
		return md5.New() //nolint:gosec // see import
	case CRC32C, CRC32, CRC64NVME:
		return &crcHash{k: crcKinds[a]}
	default:
		return sha256.New()
	}
}

// crc is the set's CRC when its one digest is a CRC: its parts' sums are
// then computed as they arrive and combined (appendSum), nil otherwise.
func (s *hashSet) crc() *crcHash {
	if len(s.hs) != 1 {
		return nil
	}
	c, _ := s.hs[0].(*crcHash)
	return c
}

// Write feeds every hash.
func (s *hashSet) Write(p []byte) {
	for _, h := range s.hs {
		h.Write(p)
	}
}

// Sums returns the digests computed so far.
func (s *hashSet) Sums() []Digest {
	out := make([]Digest, len(s.hs))
	for i, h := range s.hs {
		out[i] = Digest{Algorithm: s.algs[i], Hex: hex.EncodeToString(h.Sum(nil))}
	}
	return out
}

// state returns the hashes' internal states, to resume after a restart.
func (s *hashSet) state() (map[Algorithm][]byte, error) {
	out := make(map[Algorithm][]byte, len(s.hs))
	for i, h := range s.hs {
		m, ok := h.(encoding.BinaryMarshaler)
		if !ok {
			return nil, fmt.Errorf("%s hash state cannot be saved", s.algs[i])
		}
		b, err := m.MarshalBinary()
		if err != nil {
			return nil, err
		}
		out[s.algs[i]] = b
	}
	return out, nil
}

// restore sets the hashes' states from state; false when any is missing
// or unreadable (the caller hashes from the start instead).
func (s *hashSet) restore(st map[Algorithm][]byte) bool {
	for i, h := range s.hs {
		u, ok := h.(encoding.BinaryUnmarshaler)
		b, have := st[s.algs[i]]
		if !ok || !have || u.UnmarshalBinary(b) != nil {
			return false
		}
	}
	return true
}

// verifySums compares what the source vouched for with what was computed
// (the cheapest of them); the others are not computed, and digests of
// algorithms Load does not know are skipped.
func verifySums(f *File, sums []Digest) error {
	for _, want := range f.Digests {
		i := slices.IndexFunc(sums, func(d Digest) bool { return d.Algorithm == want.Algorithm })
		if i < 0 {
			continue
		}
		if got := sums[i].Hex; got != want.Hex {
			return fmt.Errorf("%s: %s is %s, the source lists %s: %w", f.Path, want.Algorithm, got, want.Hex, ErrVerification)
		}
	}
	return nil
}

// CompositeSuffix ends the algorithm of a Composite digest in the
// manifest: "md5-parts" for an S3 multipart ETag.
const CompositeSuffix = "-parts"

// verifiable reports whether Load checks f's content against its source:
// a digest of the whole file, or a valid Composite.
func verifiable(f *File) bool { return vouched(f) || byComposite(f) }

// byComposite reports whether f is verified by its Composite: it has a
// valid one, can be fetched in its parts, and lists nothing of the whole.
func byComposite(f *File) bool { return !vouched(f) && !f.Sequential && f.Composite.Valid(f.Size) }

// vouched reports whether the source listed a digest Load checks.
func vouched(f *File) bool {
	_, ok := cheapest(f)
	return ok
}

// digestOf returns the digest of algorithm a that f lists, or "".
func digestOf(f *File, a Algorithm) string {
	for _, d := range f.Digests {
		if d.Algorithm == a {
			return d.Hex
		}
	}
	return ""
}
