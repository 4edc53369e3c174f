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

// known are the algorithms Load computes, in the order it reports them.
var known = []Algorithm{SHA256, GitSHA1, MD5, CRC32C}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// hashSet computes, in one pass, SHA-256 (always: the manifest records
// it) and every other algorithm a file's source vouches for.
type hashSet struct {
	algs []Algorithm
	hs   []hash.Hash
}

func newHashSet(f *File) *hashSet {
	s := &hashSet{}
	for _, a := range known {
		if a != SHA256 && !slices.ContainsFunc(f.Digests, func(d Digest) bool { return d.Algorithm == a }) {
			continue
		}
		s.algs = append(s.algs, a)
		s.hs = append(s.hs, newHash(a, f.Size))
	}
	return s
}

func newHash(a Algorithm, size int64) hash.Hash {
	switch a {
	case GitSHA1:
		h := sha1.New() //nolint:gosec // see import
		h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
		return h
	case MD5:
		return md5.New() //nolint:gosec // see import
	case CRC32C:
		return crc32.New(castagnoli)
	default:
		return sha256.New()
	}
}

// Write feeds every hash.
func (s *hashSet) Write(p []byte) {
	for _, h := range s.hs {
		h.Write(p)
	}
}

// Sums returns the digests computed so far, SHA-256 first.
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

// verifySums compares what the source vouched for with what was computed.
// Digests of algorithms Load does not know are skipped.
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

// vouched reports whether the source listed a digest Load checks.
func vouched(f *File) bool {
	return slices.ContainsFunc(f.Digests, func(d Digest) bool { return slices.Contains(known, d.Algorithm) })
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
