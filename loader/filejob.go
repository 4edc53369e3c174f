package loader

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
)

// fileJob is one file being fetched: its partial file, which parts are
// on disk, and the hashes over the contiguous prefix.
type fileJob struct {
	f        *File
	id       string
	partSize int64
	nparts   int
	// target is where the verified content goes, relative to the
	// destination (unused for archives).
	target string

	// got is, for each part being fetched, the length of its prefix
	// written so far: a checkpoint records it, so that a kill loses only
	// what arrived since.
	got []atomic.Int64
	// dirty says bytes arrived since the last checkpoint.
	dirty atomic.Bool

	mu    sync.Mutex
	fh    *os.File
	done  []bool
	ndone int // parts done
	// hashed is how far the file is hashed (or its parts combined), and
	// hashing says a worker is feeding its hashes: one at a time.
	hashed  int64
	hashing bool
	// completed says one caller of partDone was told the file is whole and
	// hashed.
	completed bool
	hs        *hashSet
	snap      map[Algorithm][]byte // hs's state at snapAt
	snapAt    int64
	retried   bool // verification failed once and the file was fetched again
	// rb is the reorder buffer the files hashed in order share; segs holds
	// each part's bytes in it, in order of offset, and cur the slab its
	// next bytes go to (see inorder.go).
	rb   *reorderBuffer
	segs map[int][]segment
	cur  map[int]*slab
	// partSum is, for each part when the file is verified part by part
	// (its digest is a CRC, or a Composite), the part's CRC or digest,
	// computed as its bytes arrived (summed[i] says it is known): the
	// file's CRC combines them in order with no read-back, a Composite
	// checks the digest of them. Parts an earlier run fetched are read
	// back.
	partSum []partSum
	summed  []bool
	// crcKind is the file's digest's kind when it is a CRC, else nil.
	crcKind *crcKind
	// composite is the file's Composite digest when it has a valid one.
	composite *Composite

	ckptMu sync.Mutex
}

// maxParts bounds a file's parts (and its checkpoint): a file larger than
// maxParts parts gets larger parts.
const maxParts = 1 << 16

// partSum is what a part was summed to: its CRC, or its digest.
type partSum struct {
	crc    uint64
	digest []byte
}

func newFileJob(f *File, id, target string, partSize int64) *fileJob {
	var composite *Composite
	partSize = max(partSize, (f.Size+maxParts-1)/maxParts)
	switch {
	case byComposite(f):
		// The upload's own parts: each one's digest is checked.
		composite, partSize = f.Composite, f.Composite.PartSize
	case f.Sequential || f.Size <= partSize:
		partSize = max(f.Size, 1)
	}
	n := int((f.Size + partSize - 1) / partSize)
	j := &fileJob{f: f, id: id, target: target, partSize: partSize, nparts: n, done: make([]bool, n),
		got: make([]atomic.Int64, n), hs: newHashSet(f), partSum: make([]partSum, n), summed: make([]bool, n),
		composite: composite, rb: newReorderBuffer(0, reorderSlab)}
	if a, ok := cheapest(f); ok {
		j.crcKind = crcKinds[a]
	}
	return j
}

// byParts reports whether the file is verified part by part: a CRC
// combined, or a Composite.
func (j *fileJob) byParts() bool { return j.crcKind != nil || j.composite != nil }

// newPartSummer returns what sums one part's bytes as they arrive: the
// CRC's update, or the composite's digest; nil when the file is not
// verified part by part.
func (j *fileJob) newPartSummer() *partSummer {
	switch {
	case j.crcKind != nil:
		return &partSummer{crc: j.crcKind}
	case j.composite != nil:
		return &partSummer{h: newHash(j.composite.Algorithm, 0)}
	}
	return nil
}

// partSummer sums the bytes of one part.
type partSummer struct {
	crc *crcKind
	sum uint64
	h   hash.Hash
}

func (p *partSummer) write(b []byte) {
	if p.crc != nil {
		p.sum = p.crc.update(p.sum, b)
		return
	}
	p.h.Write(b)
}

func (p *partSummer) reset() {
	p.sum = 0
	if p.h != nil {
		p.h.Reset()
	}
}

func (p *partSummer) result() *partSum {
	if p.crc != nil {
		return &partSum{crc: p.sum}
	}
	return &partSum{digest: p.h.Sum(nil)}
}

// verifyComposite checks the digest of the parts' digests against the
// file's Composite; nil when it has none.
func (j *fileJob) verifyComposite() error {
	c := j.composite
	if c == nil {
		return nil
	}
	h := newHash(c.Algorithm, 0)
	for i := range j.nparts {
		if !j.summed[i] {
			return fmt.Errorf("%s: part %d was never summed", j.f.Path, i+1)
		}
		h.Write(j.partSum[i].digest)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != c.Hex {
		return fmt.Errorf("%s: the %s of its %d parts' %s digests is %s-%d, the source lists %s-%d: %w",
			j.f.Path, c.Algorithm, c.Parts, c.Algorithm, got, c.Parts, c.Hex, c.Parts, ErrVerification)
	}
	return nil
}

func (j *fileJob) partRange(i int) (off, n int64) {
	off = int64(i) * j.partSize
	return off, min(j.partSize, j.f.Size-off)
}

// open opens (creating or resuming) the partial file and returns the
// parts still to fetch, and the bytes already on disk.
func (j *fileJob) open(root *os.Root) ([]*part, int64, error) {
	name := partialName(j.id)
	ck, err := readCheckpoint(root, j.id)
	if err != nil {
		return nil, 0, err
	}
	fh, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, err
	}
	j.fh = fh
	fi, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	resumed := ck != nil && ck.ID == j.id && ck.Size == j.f.Size && ck.PartSize == j.partSize &&
		fi.Size() == j.f.Size && !j.f.Sequential
	if resumed {
		j.done = getBits(ck.Done, j.nparts)
		for i, g := range ck.Partial {
			if i >= 0 && i < j.nparts && !j.done[i] {
				_, n := j.partRange(i)
				if g >= n {
					j.done[i] = true // whole, killed before it was marked
					continue
				}
				j.got[i].Store(max(g, 0))
			}
		}
		if ck.Hashed > 0 && ck.Hashed <= j.f.Size && j.composite == nil && j.onDisk(ck.Hashed) && j.hs.restore(ck.HashState) {
			// A composite's part digests are not checkpointed: every part
			// is summed again, the ones on disk read back.
			j.hashed, j.snap, j.snapAt = ck.Hashed, ck.HashState, ck.Hashed
		} else {
			j.hs = newHashSet(j.f)
		}
	} else {
		if err := fh.Truncate(0); err != nil {
			return nil, 0, err
		}
		if err := preallocate(fh, j.f.Size); err != nil {
			return nil, 0, fmt.Errorf("%s: %w: %w", j.f.Path, err, ErrNoSpace)
		}
		_ = root.Remove(checkpointName(j.id))
	}
	var todo []*part
	var have int64
	for i := range j.nparts {
		off, n := j.partRange(i)
		if j.done[i] {
			j.ndone++
			have += n
			continue
		}
		skip := j.got[i].Load()
		have += skip
		todo = append(todo, &part{job: j, idx: i, off: off, n: n, skip: skip})
	}
	return todo, have, nil
}

// onDisk reports whether a checkpoint records every byte before end on
// disk: the parts done, and the prefix of the part end falls in. A hash
// state over more is not believed.
func (j *fileJob) onDisk(end int64) bool {
	for i := range j.nparts {
		off, n := j.partRange(i)
		if off >= end {
			break
		}
		if !j.done[i] && j.got[i].Load() < min(n, end-off) {
			return false
		}
	}
	return true
}

// contiguous is the end of the prefix of parts on disk. j.mu is held.
func (j *fileJob) contiguous() int64 {
	end := int64(0)
	for i, d := range j.done {
		if !d {
			break
		}
		off, n := j.partRange(i)
		end = off + n
	}
	return end
}

// partDone records part i on disk (none when i < 0), with what its bytes
// summed to when sum is not nil, and hashes whatever became contiguous:
// reading back what a file hashed in order has on disk at its hash's
// position, summing or combining a file verified part by part. It reports
// whether the whole file is now on disk and hashed (exactly one caller
// sees true).
func (j *fileJob) partDone(i int, buf []byte, sum *partSum) (complete bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if i >= 0 && !j.done[i] {
		j.done[i] = true
		j.ndone++
		if sum != nil {
			j.partSum[i], j.summed[i] = *sum, true
		}
	}
	if !j.hashing {
		// Else the worker hashing will see this part, or will call
		// partDone itself: a worker hashing from arrived has a part to finish.
		j.hashing = true
		switch {
		case j.inOrder():
			err = j.drain(nil, 0, buf)
		case j.byParts():
			err = j.combineParts(buf)
		default:
			// Nothing to compute: the source vouches for nothing Load knows.
			j.hashed = j.contiguous()
			j.snapAt = j.hashed
		}
		j.hashing = false
		if err != nil {
			return false, err
		}
	}
	if j.completed || j.hashed < j.f.Size || j.ndone < j.nparts {
		return false, nil
	}
	j.completed = true
	return true, nil
}

// combineParts combines, in order, the CRCs of the parts summed as they
// arrived (microseconds each) or keeps a Composite's digests, under j.mu;
// the first part that was not summed (an earlier run fetched it) is read
// back outside it. j.mu and the hashing token are held.
func (j *fileJob) combineParts(buf []byte) error {
	for {
		end := j.contiguous()
		if end <= j.hashed {
			return nil
		}
		start := j.hashed
		crc := j.hs.crc()
		for start < end {
			k := int(start / j.partSize)
			if !j.summed[k] {
				break
			}
			_, n := j.partRange(k)
			if crc != nil {
				crc.appendSum(j.partSum[k].crc, n)
			}
			start += n
		}
		if start > j.hashed {
			st, serr := j.hs.state()
			if serr != nil {
				return fmt.Errorf("%s: %w", j.f.Path, serr)
			}
			from := j.hashed
			j.hashed, j.snap, j.snapAt = start, st, start
			j.mu.Unlock()
			startWriteback(j.fh, from, start-from)
			j.mu.Lock()
			continue
		}
		k := int(start / j.partSize)
		off, n := j.partRange(k)
		ps := j.newPartSummer()
		j.mu.Unlock()
		err := j.readBack(ps.write, off, off+n, buf)
		j.mu.Lock()
		if err != nil {
			return fmt.Errorf("%s: reading back: %w", j.f.Path, err)
		}
		j.partSum[k], j.summed[k] = *ps.result(), true
	}
}

// readBack feeds the bytes [start, end) of the partial file to feed, a
// buffer at a time: a part to its summer, a prefix to the file's hashes.
func (j *fileJob) readBack(feed func([]byte), start, end int64, buf []byte) error {
	for off := start; off < end; {
		n := min(int64(len(buf)), end-off)
		got, err := j.fh.ReadAt(buf[:n], off)
		if got > 0 {
			feed(buf[:got])
			off += int64(got)
		}
		if err != nil && off < end {
			return err
		}
	}
	return nil
}

// checkpoint syncs the partial file and records what is on disk: the
// parts done, the prefix of each part in flight, the hashes' state. The
// synced, hashed prefix leaves the page cache.
func (j *fileJob) checkpoint(root *os.Root) error {
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	if !j.dirty.Swap(false) {
		return nil
	}
	j.mu.Lock()
	if j.fh == nil {
		j.mu.Unlock()
		return nil
	}
	ck := &checkpoint{ID: j.id, Size: j.f.Size, PartSize: j.partSize, Done: setBits(j.done), Hashed: j.snapAt, HashState: j.snap}
	for i, d := range j.done {
		if g := j.got[i].Load(); !d && g > 0 {
			if ck.Partial == nil {
				ck.Partial = map[int]int64{}
			}
			ck.Partial[i] = g
		}
	}
	fh := j.fh
	j.mu.Unlock()
	// Everything the snapshot counts was written before it was taken: the
	// sync makes it durable before the checkpoint says so.
	if err := datasync(fh); err != nil {
		return fmt.Errorf("%s: sync: %w", j.f.Path, noSpace(err))
	}
	dropCache(fh, 0, ck.Hashed)
	if j.f.Sequential {
		return nil // nothing to resume from
	}
	return noSpace(writeCheckpoint(root, ck))
}

// finalCheckpoint makes the whole, hashed file durable and records every
// part before it is verified and staged.
func (j *fileJob) finalCheckpoint(root *os.Root) error {
	j.dirty.Store(true)
	return j.checkpoint(root)
}

// unstage moves a verified file that a kill left in the staging area
// without its done record back to its partial path, where its checkpoint
// (every part on disk) lets the next run hash and stage it again instead
// of fetching it whole. An archive is never staged whole: its partial file
// stays until the record is written.
func unstage(root *os.Root, id string, f *File) error {
	if f.Unpack != ArchiveNone {
		return nil
	}
	staged := stagedName(id, false, LoadedFile{})
	fi, err := root.Lstat(staged)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return nil //nolint:nilerr // nothing usable staged
	}
	if pi, err := root.Lstat(partialName(id)); err == nil && pi.Mode().IsRegular() && pi.Size() == f.Size {
		return nil // the partial file is the one its checkpoint describes
	}
	return root.Rename(staged, partialName(id))
}

// reset forgets everything about the file for a second fetch after a
// failed verification, returning every part.
func (j *fileJob) reset(root *os.Root) ([]*part, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.retried = true
	j.done, j.ndone, j.completed = make([]bool, j.nparts), 0, false
	j.hashed, j.snap, j.snapAt = 0, nil, 0
	j.dropSegments()
	for i := range j.got {
		j.got[i].Store(0)
	}
	j.hs = newHashSet(j.f)
	j.summed = make([]bool, j.nparts)
	j.partSum = make([]partSum, j.nparts)
	if err := root.Remove(checkpointName(j.id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	out := make([]*part, j.nparts)
	for i := range out {
		off, n := j.partRange(i)
		out[i] = &part{job: j, idx: i, off: off, n: n}
	}
	return out, nil
}

// close closes the partial file, after any checkpoint still syncing it
// (checkpoint holds ckptMu while it uses the file outside mu).
func (j *fileJob) close() {
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fh != nil {
		_ = j.fh.Close()
		j.fh = nil
	}
}

// noSpace marks a full disk as ErrNoSpace.
func noSpace(err error) error {
	if err != nil && isNoSpace(err) && !errors.Is(err, ErrNoSpace) {
		return fmt.Errorf("%w: %w", err, ErrNoSpace)
	}
	return err
}
