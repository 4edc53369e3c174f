package loader

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// A file whose digest is a sequential hash (SHA-256, SHA-1, git's blob
// SHA-1, MD5) is hashed in order of offset as its bytes arrive: the worker
// that wrote bytes at the hash's position hashes them at once, from its own
// buffer. Its parts are fetched in parallel, so bytes also arrive ahead of
// the hash: those not too far ahead are copied into the reorder buffer
// while it has a free slab, the others are only written to disk, and read
// back (from the page cache) when the hash gets to them. The buffer is
// shared by every file and never holds more than its slabs: a slow part
// costs reading back, never memory.

// reorderSlab is the reorder buffer's unit of memory.
const reorderSlab = 256 << 10

// reorderPerWorker is the reorder buffer's default size per worker, as
// much as the worker's own buffer, so that memory still grows with the
// concurrency only. More buys little: copying a byte into the buffer costs
// about what reading it back from the page cache does (bench-loader: the
// same CPU per GB and time with 32 MiB as with 16 MiB, and 6 MiB more
// peak RSS).
const reorderPerWorker = copyBufferSize

// reorderBuffer is the memory that the files hashed in order share for
// bytes that arrived ahead of their hash: at most max slabs, made on
// first use and reused. It also counts how bytes reached their hashes.
type reorderBuffer struct {
	slabSize int
	max      int

	mu    sync.Mutex
	free  []*slab
	made  int
	inUse int
	peak  int

	asArrived, buffered, readBack atomic.Int64
}

func newReorderBuffer(bytes int64, slabSize int) *reorderBuffer {
	return &reorderBuffer{slabSize: slabSize, max: int(max(bytes, 0) / int64(slabSize))}
}

// size is the most the buffer holds.
func (r *reorderBuffer) size() int64 { return int64(r.max) * int64(r.slabSize) }

// get returns a free slab, or nil when all max are in use.
func (r *reorderBuffer) get() *slab {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s *slab
	switch {
	case len(r.free) > 0:
		s = r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
	case r.made < r.max:
		s = &slab{b: make([]byte, r.slabSize)}
		r.made++
	default:
		return nil
	}
	r.inUse++
	r.peak = max(r.peak, r.inUse)
	return s
}

func (r *reorderBuffer) put(s *slab) {
	s.filled, s.consumed = 0, 0
	r.mu.Lock()
	r.free = append(r.free, s)
	r.inUse--
	r.mu.Unlock()
}

// stats reports the counts.
func (r *reorderBuffer) stats() InOrderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return InOrderStats{AsArrived: r.asArrived.Load(), Buffered: r.buffered.Load(), ReadBack: r.readBack.Load(),
		BufferPeak: int64(r.peak) * int64(r.slabSize), BufferBound: r.size(), BufferInUse: int64(r.inUse) * int64(r.slabSize)}
}

// InOrderStats says how the bytes of the files hashed in order reached
// their hash, and what the reorder buffer held.
type InOrderStats struct {
	// AsArrived were hashed by the worker that wrote them, from its own
	// buffer; Buffered were copied into the reorder buffer and hashed from
	// there; ReadBack were read back from disk: they arrived too far ahead
	// of the hash or when the buffer had no free slab, or an earlier run
	// wrote them.
	AsArrived, Buffered, ReadBack int64
	// BufferPeak is the most the buffer held at once; it never exceeds
	// BufferBound, its size. BufferInUse is what it holds now.
	BufferPeak, BufferBound, BufferInUse int64
}

// slab is memory of the reorder buffer that one part's bytes are appended
// to; it returns to the buffer when the hash has consumed all it holds.
type slab struct {
	b                []byte
	filled, consumed int
}

// segment is bytes of a part held in the buffer: s.b[lo:hi], at file
// offset off.
type segment struct {
	off    int64
	s      *slab
	lo, hi int
}

func (g segment) end() int64 { return g.off + int64(g.hi-g.lo) }

// inOrder reports whether the file is hashed in order: its one digest is
// a sequential hash, not a CRC or a Composite combined from its parts.
func (j *fileJob) inOrder() bool { return !j.byParts() && len(j.hs.hs) > 0 }

// arrived records that part i's bytes b, written at file offset off, are
// on disk, its prefix now got bytes long. A file hashed in order hashes
// them at once when its hash has reached off and no other worker is
// hashing it; else they are copied into the reorder buffer when it can
// hold them, or left on disk to be read back.
func (j *fileJob) arrived(i int, off int64, b []byte, got int64) error {
	if !j.inOrder() {
		j.got[i].Store(got)
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	// Published in the same critical section as the choice below, so that
	// a worker draining the hash sees these bytes on disk only once it can
	// also see them in the buffer.
	j.got[i].Store(got)
	if j.hashing || j.hashed != off {
		j.hold(i, off, b)
		return nil
	}
	j.hashing = true
	defer func() { j.hashing = false }()
	// No reading back here: b is in the worker's buffer, which the read
	// would overwrite. What is on disk waits for a part's end (partDone).
	return j.drain(b, off, nil)
}

// hold copies part i's bytes b at off into the reorder buffer while it
// has free slabs, as far as they lie within the buffer's size past the
// part the hash is in: bytes further ahead could not all be held, and
// would take the slabs that the bytes the hash needs first arrive to.
// j.mu is held.
func (j *fileJob) hold(i int, off int64, b []byte) {
	if off < j.hashed {
		return
	}
	start, n := j.partRange(int(j.hashed / j.partSize))
	if limit := start + n + j.rb.size(); off+int64(len(b)) > limit {
		if off >= limit {
			return
		}
		b = b[:limit-off]
	}
	for len(b) > 0 {
		s := j.cur[i]
		if s == nil || s.filled == len(s.b) {
			if s = j.rb.get(); s == nil {
				return // the rest stays on disk, read back later
			}
			if j.cur == nil {
				j.cur = map[int]*slab{}
			}
			j.cur[i] = s
		}
		n := copy(s.b[s.filled:], b)
		q := j.segs[i]
		if last := len(q) - 1; last >= 0 && q[last].s == s && q[last].hi == s.filled && q[last].end() == off {
			q[last].hi += n
		} else {
			q = append(q, segment{off: off, s: s, lo: s.filled, hi: s.filled + n})
		}
		if j.segs == nil {
			j.segs = map[int][]segment{}
		}
		j.segs[i] = q
		s.filled += n
		j.rb.buffered.Add(int64(n))
		off += int64(n)
		b = b[n:]
	}
}

// drain feeds the hash, in order, whatever is at its position: hand (a
// worker's bytes just written at handOff), the reorder buffer's segments
// and, when buf is given to read with, bytes on disk. It stops where none
// is. The caller holds j.mu and the hashing token; j.mu is released while
// hashing and reading.
func (j *fileJob) drain(hand []byte, handOff int64, buf []byte) error {
	start := j.hashed
	for j.hashed < j.f.Size {
		pos := j.hashed
		k := int(pos / j.partSize)
		q := j.front(k, pos)
		switch {
		case hand != nil && handOff == pos:
			b := hand
			hand = nil
			j.mu.Unlock()
			j.hs.Write(b)
			j.mu.Lock()
			j.hashed += int64(len(b))
			j.rb.asArrived.Add(int64(len(b)))
		case len(q) > 0 && q[0].off == pos:
			g := q[0]
			j.pop(k)
			j.mu.Unlock()
			j.hs.Write(g.s.b[g.lo:g.hi])
			j.mu.Lock()
			j.hashed = g.end()
			j.consumed(k, g)
		case buf != nil:
			off, n := j.partRange(k)
			end := off + j.got[k].Load()
			if j.done[k] {
				end = off + n
			}
			if len(q) > 0 {
				end = min(end, q[0].off)
			}
			if end <= pos {
				return j.snapshot(start)
			}
			j.mu.Unlock()
			err := j.readBack(j.hs.Write, pos, end, buf)
			j.mu.Lock()
			if err != nil {
				return fmt.Errorf("%s: reading back: %w", j.f.Path, err)
			}
			j.hashed = end
			j.rb.readBack.Add(end - pos)
		default:
			return j.snapshot(start)
		}
	}
	return j.snapshot(start)
}

// snapshot saves the hash's state for the next checkpoint when it moved
// since start. j.mu and the hashing token are held.
func (j *fileJob) snapshot(start int64) error {
	if j.hashed == start {
		return nil
	}
	st, err := j.hs.state()
	if err != nil {
		return fmt.Errorf("%s: %w", j.f.Path, err)
	}
	j.snap, j.snapAt = st, j.hashed
	return nil
}

// front returns part k's segments, those the hash already passed dropped
// (none should be: a byte reaches the buffer only ahead of the hash).
func (j *fileJob) front(k int, pos int64) []segment {
	q := j.segs[k]
	for len(q) > 0 && q[0].off < pos {
		g := q[0]
		if g.end() <= pos {
			j.pop(k)
			j.consumed(k, g)
			q = j.segs[k]
			continue
		}
		skip := int(pos - g.off)
		q[0].off, q[0].lo = pos, g.lo+skip
		g.s.consumed += skip
	}
	return q
}

func (j *fileJob) pop(k int) {
	if q := j.segs[k]; len(q) > 1 {
		j.segs[k] = q[1:]
	} else {
		delete(j.segs, k)
	}
}

// consumed returns g's slab to the buffer once the hash has consumed all
// it holds.
func (j *fileJob) consumed(k int, g segment) {
	g.s.consumed += g.hi - g.lo
	if g.s.consumed < g.s.filled {
		return
	}
	if j.cur[k] == g.s {
		delete(j.cur, k)
	}
	j.rb.put(g.s)
}

// restart forgets the hash of a file fetched again from its start (a
// source without ranges, after a failed attempt), so that the failed
// attempt's bytes, hashed or buffered, are not hashed twice.
func (j *fileJob) restart() {
	if !j.inOrder() {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.hs = newHashSet(j.f)
	j.hashed, j.snap, j.snapAt = 0, nil, 0
	for i := range j.got {
		j.got[i].Store(0)
	}
	j.dropSegments()
}

// dropSegments returns every slab the file holds to the buffer. j.mu is
// held.
func (j *fileJob) dropSegments() {
	slabs := map[*slab]bool{}
	for _, q := range j.segs {
		for _, g := range q {
			slabs[g.s] = true
		}
	}
	for _, s := range j.cur {
		slabs[s] = true
	}
	for s := range slabs {
		j.rb.put(s)
	}
	j.segs, j.cur = nil, nil
}
