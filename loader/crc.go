package loader

import (
	"encoding/binary"
	"errors"
	"hash"
	"hash/crc32"

	"github.com/minio/crc64nvme"
)

// crcKind is a reflected CRC with an all-ones initial value and final
// XOR (CRC-32/ISCSI, CRC-32/ISO-HDLC, CRC-64/NVME): the CRCs S3 and GCS
// publish. Their value over A then B follows from their values over A and
// over B and B's length (combine), so each part of a file is summed as it
// arrives, in the goroutine that receives it, and the parts' sums are
// combined in order: no byte is read back from disk to verify it.
type crcKind struct {
	width  int    // bits: 32 or 64
	poly   uint64 // reflected polynomial
	update func(crc uint64, p []byte) uint64
}

var (
	crc32cKind = &crcKind{width: 32, poly: crc32.Castagnoli, update: func(c uint64, p []byte) uint64 {
		return uint64(crc32.Update(uint32(c), castagnoli, p))
	}}
	crc32Kind = &crcKind{width: 32, poly: crc32.IEEE, update: func(c uint64, p []byte) uint64 {
		return uint64(crc32.Update(uint32(c), crc32.IEEETable, p))
	}}
	crc64nvmeKind = &crcKind{width: 64, poly: crc64nvme.NVME, update: crc64nvme.Update}
)

// crcKinds are the algorithms that are such CRCs.
var crcKinds = map[Algorithm]*crcKind{CRC32C: crc32cKind, CRC32: crc32Kind, CRC64NVME: crc64nvmeKind}

// combine returns the CRC of A followed by B from crcA, crcB and B's
// length, in O(log lenB) steps: zlib's crc32_combine (GF(2) matrices that
// append zero bits), for any width.
func (k *crcKind) combine(crcA, crcB uint64, lenB int64) uint64 {
	if lenB <= 0 {
		return crcA
	}
	var odd, even [64]uint64
	odd[0] = k.poly // the operator for one zero bit
	row := uint64(1)
	for n := 1; n < k.width; n++ {
		odd[n] = row
		row <<= 1
	}
	k.square(&even, &odd) // two zero bits
	k.square(&odd, &even) // four zero bits
	for {
		// Append lenB zero bytes to crcA, one bit of lenB at a time.
		k.square(&even, &odd)
		if lenB&1 != 0 {
			crcA = k.times(&even, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		k.square(&odd, &even)
		if lenB&1 != 0 {
			crcA = k.times(&odd, crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func (k *crcKind) times(mat *[64]uint64, vec uint64) uint64 {
	sum := uint64(0)
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func (k *crcKind) square(sq, mat *[64]uint64) {
	for n := range k.width {
		sq[n] = k.times(mat, mat[n])
	}
}

// crcHash is a running CRC of a kind, as a hash.Hash whose state can be
// saved in a checkpoint and extended by a part's CRC (appendSum).
type crcHash struct {
	k   *crcKind
	crc uint64
}

var _ hash.Hash = (*crcHash)(nil)

func (h *crcHash) Write(p []byte) (int, error) {
	h.crc = h.k.update(h.crc, p)
	return len(p), nil
}

// Sum appends the CRC, big-endian, as S3 and GCS publish it.
func (h *crcHash) Sum(b []byte) []byte {
	var full [8]byte
	binary.BigEndian.PutUint64(full[:], h.crc)
	return append(b, full[8-h.k.width/8:]...)
}

func (h *crcHash) Reset()         { h.crc = 0 }
func (h *crcHash) Size() int      { return h.k.width / 8 }
func (h *crcHash) BlockSize() int { return 1 }

// appendSum extends the CRC by n bytes whose own CRC is sum.
func (h *crcHash) appendSum(sum uint64, n int64) { h.crc = h.k.combine(h.crc, sum, n) }

const crcStateMagic = "mgcrc1"

// MarshalBinary saves the state: a magic, the width, the CRC.
func (h *crcHash) MarshalBinary() ([]byte, error) {
	b := append([]byte(crcStateMagic), byte(h.k.width)) //nolint:gosec // the width is 32 or 64
	return binary.BigEndian.AppendUint64(b, h.crc), nil
}

var errCRCState = errors.New("not a saved CRC state of this kind")

// UnmarshalBinary restores a state MarshalBinary saved for the same kind.
func (h *crcHash) UnmarshalBinary(b []byte) error {
	if len(b) != len(crcStateMagic)+9 || string(b[:len(crcStateMagic)]) != crcStateMagic || int(b[len(crcStateMagic)]) != h.k.width {
		return errCRCState
	}
	var c uint64
	for _, x := range b[len(crcStateMagic)+1:] {
		c = c<<8 | uint64(x)
	}
	h.crc = c
	return nil
}
