package loader

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// testSlab is the reorder buffer's slab in these tests: small, so that
// small files fill and empty it many times.
const testSlab = 4 << 10

// inOrderJob is a file job on a new partial file in a temporary
// destination, hashed with a, with a reorder buffer of budget bytes.
func inOrderJob(t *testing.T, content []byte, a Algorithm, partSize, budget int64, sequential bool) (*fileJob, *os.Root) {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	if err := root.MkdirAll(partialDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &File{Path: "m.bin", Size: int64(len(content)), Version: "v1", Sequential: sequential,
		Digests: []Digest{{Algorithm: a, Hex: "unused"}}}
	j := newFileJob(f, fileID(f), "m.bin", partSize)
	j.rb = newReorderBuffer(budget, testSlab)
	if !j.inOrder() {
		t.Fatalf("a file listing only %s is not hashed in order", a)
	}
	return j, root
}

// plainSum is the file's digest computed the plain way: the whole content,
// once, in order.
func plainSum(a Algorithm, content []byte) string {
	h := newHash(a, int64(len(content)))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// fetching is a part being fetched in the simulation: what of it is
// written and published.
type fetching struct {
	p   *part
	got int64
}

// simulate fetches every part of todo as the engine's workers would, w at
// a time, in random chunks and a random interleaving: each chunk written
// to the partial file, then handed to arrived from a buffer that is
// overwritten as soon as arrived returns (the worker reads its next chunk
// into it); a part's end is reported to partDone at a later step. With cuts, an attempt
// sometimes fails after writing bytes it never published (garbage, which
// the retry overwrites from where the attempt's published bytes end). It
// returns how many calls of partDone reported the file complete.
func simulate(t *testing.T, r *rand.Rand, j *fileJob, todo []*part, content []byte, w int, maxChunk int, cuts bool) int {
	t.Helper()
	var inflight []*fetching
	next, completes := 0, 0
	buf := make([]byte, maxChunk)
	for len(inflight) > 0 || next < len(todo) {
		for len(inflight) < w && next < len(todo) {
			inflight = append(inflight, &fetching{p: todo[next], got: todo[next].skip})
			next++
		}
		k := r.IntN(len(inflight))
		fp := inflight[k]
		p := fp.p
		if cuts && p.n-fp.got > 1 && r.IntN(8) == 0 {
			// A failed attempt: bytes written past what it published.
			junk := make([]byte, 1+r.IntN(int(p.n-fp.got)))
			for i := range junk {
				junk[i] = byte(r.Uint32())
			}
			if _, err := j.fh.WriteAt(junk, p.off+fp.got); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if fp.got < p.n {
			c := min(int64(1+r.IntN(maxChunk)), p.n-fp.got)
			off := p.off + fp.got
			b := buf[:c]
			copy(b, content[off:off+c])
			if _, err := j.fh.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			if err := j.arrived(p.idx, off, b, fp.got+c); err != nil {
				t.Fatal(err)
			}
			for i := range b {
				b[i] = 0xAA // the worker's next read
			}
			fp.got += c
			continue // its end is reported at a later step, as a worker does after its last write
		}
		complete, err := j.partDone(p.idx, buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if complete {
			completes++
			if j.ndone != j.nparts || j.hashed != j.f.Size {
				t.Fatalf("complete with %d of %d parts reported, %d of %d bytes hashed", j.ndone, j.nparts, j.hashed, j.f.Size)
			}
		}
		inflight = append(inflight[:k], inflight[k+1:]...)
	}
	return completes
}

// TestInOrderHash is the differential test of hashing in order: on random
// sizes, part sizes, buffer sizes, numbers of parts in flight and chunk
// interleavings, with failed attempts, the digest is the plain whole-file
// digest; every byte reaches the hash exactly once (as it arrived, from the
// buffer or read back); the buffer never holds more than its bound and is
// empty at the end.
func TestInOrderHash(t *testing.T) {
	algs := []Algorithm{SHA256, SHA1, GitSHA1, MD5}
	var reachedBound, readBackWhenFull int
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 47))
		size := r.IntN(200 << 10)
		if seed%10 == 0 {
			size = r.IntN(100)
		}
		content := make([]byte, size)
		for i := range content {
			content[i] = byte(r.Uint32())
		}
		a := algs[r.IntN(len(algs))]
		partSize := int64(1 + r.IntN(64<<10))
		budget := int64(r.IntN(16)) * testSlab
		w := 1 + r.IntN(8)
		maxChunk := 1 + r.IntN(8<<10)
		name := fmt.Sprintf("seed=%d/%s/size=%d/part=%d/buffer=%d/inflight=%d", seed, a, size, partSize, budget, w)
		j, root := inOrderJob(t, content, a, partSize, budget, false)
		todo, _, err := j.open(root)
		if err != nil {
			t.Fatal(err)
		}
		if len(todo) == 0 {
			todo = []*part{{job: j, idx: -1}}
		}
		if r.IntN(4) == 0 {
			// Parts need not start in order (a file fetched again, a
			// scheduler's choice): the hash still takes them in order.
			r.Shuffle(len(todo), func(a, b int) { todo[a], todo[b] = todo[b], todo[a] })
		}
		completes := simulate(t, r, j, todo, content, w, maxChunk, true)
		st := j.rb.stats()
		if got, want := j.hs.Sums()[0].Hex, plainSum(a, content); got != want || completes != 1 {
			t.Fatalf("%s: in order %s, plain %s; completed %d times, want once", name, got, want, completes)
		}
		if seen := st.AsArrived + st.Buffered + st.ReadBack; seen != int64(size) {
			t.Fatalf("%s: %d bytes reached the hash (%d as they arrived, %d buffered, %d read back), want %d",
				name, seen, st.AsArrived, st.Buffered, st.ReadBack, size)
		}
		if st.BufferPeak > st.BufferBound || st.BufferBound != budget || st.BufferInUse != 0 {
			t.Fatalf("%s: buffer peak %d, bound %d (want %d), %d still held at the end", name, st.BufferPeak, st.BufferBound, budget, st.BufferInUse)
		}
		if budget > 0 && st.BufferPeak == budget {
			reachedBound++
			if st.ReadBack > 0 {
				readBackWhenFull++
			}
		}
		j.close()
	}
	// The cases above must exercise the bound and the fallback, or they
	// prove nothing about them.
	t.Logf("the buffer reached its bound in %d cases, with bytes read back in %d", reachedBound, readBackWhenFull)
	if reachedBound < 20 || readBackWhenFull < 20 {
		t.Errorf("the buffer reached its bound in %d cases, and bytes were read back in %d of them; want at least 20 each", reachedBound, readBackWhenFull)
	}
}

// TestInOrderRestart: a file fetched again from its start (a source
// without ranges) after an attempt that published corrupted bytes, and a
// file fetched again after a digest mismatch, hash only the last attempt's
// bytes.
func TestInOrderRestart(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	content := make([]byte, 150<<10)
	for i := range content {
		content[i] = byte(r.Uint32())
	}
	corrupt := append([]byte(nil), content...)
	corrupt[len(corrupt)/3] ^= 1
	want := plainSum(SHA256, content)

	t.Run("no ranges", func(t *testing.T) {
		j, root := inOrderJob(t, content, SHA256, 16<<10, 8*testSlab, true)
		todo, _, err := j.open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer j.close()
		p := todo[0]
		// The failed attempt: corrupted bytes, published and hashed, then
		// a cut two thirds in.
		cut := int64(len(content)) * 2 / 3
		for off := int64(0); off < cut; off += 1000 {
			b := corrupt[off:min(off+1000, cut)]
			if _, err := j.fh.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
			if err := j.arrived(p.idx, off, b, off+int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
		j.restart()
		if completes := simulate(t, r, j, todo, content, 1, 5000, false); completes != 1 {
			t.Fatalf("completed %d times", completes)
		}
		if got := j.hs.Sums()[0].Hex; got != want {
			t.Errorf("after a restart: %s, want %s", got, want)
		}
	})

	t.Run("fetched again after a mismatch", func(t *testing.T) {
		j, root := inOrderJob(t, content, SHA256, 16<<10, 8*testSlab, false)
		todo, _, err := j.open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer j.close()
		simulate(t, r, j, todo, corrupt, 4, 3000, true)
		if got := j.hs.Sums()[0].Hex; got == want {
			t.Fatal("the corrupted file hashed as the right one")
		}
		again, err := j.reset(root)
		if err != nil {
			t.Fatal(err)
		}
		if completes := simulate(t, r, j, again, content, 4, 3000, true); completes != 1 {
			t.Fatalf("completed %d times", completes)
		}
		if got := j.hs.Sums()[0].Hex; got != want {
			t.Errorf("fetched again: %s, want %s", got, want)
		}
		if st := j.rb.stats(); st.BufferInUse != 0 || st.BufferPeak > st.BufferBound {
			t.Errorf("buffer: %+v", st)
		}
	})
}

// TestInOrderConcurrent runs the workers as goroutines, racing for the
// file's lock and its hash (with -race, a check of the locking too): the
// digest is the plain one, and the buffer stays within its bound.
func TestInOrderConcurrent(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 9))
		content := make([]byte, 300<<10+r.IntN(100<<10))
		for i := range content {
			content[i] = byte(r.Uint32())
		}
		j, root := inOrderJob(t, content, SHA256, int64(8<<10+r.IntN(32<<10)), int64(r.IntN(8))*testSlab, false)
		todo, _, err := j.open(root)
		if err != nil {
			t.Fatal(err)
		}
		parts := make(chan *part, len(todo))
		for _, p := range todo {
			parts <- p
		}
		close(parts)
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			completes int
			failed    error
		)
		for w := range 6 {
			wg.Go(func() {
				rw := rand.New(rand.NewPCG(seed, uint64(w)))
				buf := make([]byte, 4<<10)
				for p := range parts {
					for got := int64(0); got < p.n; {
						c := min(int64(1+rw.IntN(len(buf))), p.n-got)
						b := buf[:c]
						copy(b, content[p.off+got:])
						_, err := j.fh.WriteAt(b, p.off+got)
						if err == nil {
							err = j.arrived(p.idx, p.off+got, b, got+c)
						}
						if err != nil {
							mu.Lock()
							failed = err
							mu.Unlock()
							return
						}
						got += c
					}
					complete, err := j.partDone(p.idx, buf, nil)
					mu.Lock()
					if complete {
						completes++
					}
					if err != nil {
						failed = err
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if failed != nil {
			t.Fatal(failed)
		}
		sum := sha256.Sum256(content)
		st := j.rb.stats()
		if got := j.hs.Sums()[0].Hex; got != hex.EncodeToString(sum[:]) || completes != 1 {
			t.Errorf("seed %d: %s, want %x; completed %d times", seed, got, sum, completes)
		}
		if st.BufferPeak > st.BufferBound || st.BufferInUse != 0 ||
			st.AsArrived+st.Buffered+st.ReadBack != int64(len(content)) {
			t.Errorf("seed %d: %+v for %d bytes", seed, st, len(content))
		}
		j.close()
	}
}

// TestInOrderResume: a checkpoint taken with the hash in the middle of a
// part resumes the hash there; what the earlier run wrote and recorded
// beyond it is read back (never fetched again), what it wrote and did not
// record is fetched again. A hash state over bytes the checkpoint does not
// record on disk is not believed: the file is hashed from its start.
func TestInOrderResume(t *testing.T) {
	const partSize = 16 << 10
	r := rand.New(rand.NewPCG(5, 6))
	content := make([]byte, 100<<10)
	for i := range content {
		content[i] = byte(r.Uint32())
	}
	for name, tc := range map[string]struct {
		hashed     int64 // what the checkpoint's hash state covers
		wantHashed int64 // where the resumed hash starts
	}{
		"hash state in part 3, within its recorded prefix": {hashed: 2*partSize + 6000, wantHashed: 2*partSize + 6000},
		"hash state at the end of part 2":                  {hashed: 2 * partSize, wantHashed: 2 * partSize},
		"hash state beyond part 3's recorded prefix":       {hashed: 2*partSize + 12000, wantHashed: 0},
		"hash state in part 5, part 4 not on disk":         {hashed: 4*partSize + 100, wantHashed: 0},
	} {
		t.Run(name, func(t *testing.T) {
			j, root := inOrderJob(t, content, SHA256, partSize, 4*testSlab, false)
			// The earlier run: parts 1 and 2 done, 10000 bytes of part 3
			// and 3000 of part 5 recorded, 2000 more of part 3 written
			// (corrupted in transit, say) after the last checkpoint.
			disk := make([]byte, len(content))
			copy(disk[:2*partSize+10000], content)
			copy(disk[4*partSize:4*partSize+3000], content[4*partSize:])
			for i := 2*partSize + 10000; i < 2*partSize+12000; i++ {
				disk[i] = ^content[i]
			}
			if err := root.WriteFile(partialName(j.id), disk, 0o644); err != nil {
				t.Fatal(err)
			}
			h := newHashSet(j.f)
			h.Write(content[:tc.hashed])
			st, err := h.state()
			if err != nil {
				t.Fatal(err)
			}
			ck := &checkpoint{ID: j.id, Size: j.f.Size, PartSize: partSize, Done: setBits([]bool{true, true}),
				Partial: map[int]int64{2: 10000, 4: 3000}, Hashed: tc.hashed, HashState: st}
			if err := writeCheckpoint(root, ck); err != nil {
				t.Fatal(err)
			}
			todo, have, err := j.open(root)
			if err != nil {
				t.Fatal(err)
			}
			defer j.close()
			if want := int64(2*partSize + 10000 + 3000); have != want {
				t.Errorf("kept %d bytes, want %d", have, want)
			}
			if j.hashed != tc.wantHashed {
				t.Fatalf("the hash resumes at %d, want %d", j.hashed, tc.wantHashed)
			}
			if completes := simulate(t, r, j, todo, content, 3, 3000, true); completes != 1 {
				t.Fatalf("completed %d times", completes)
			}
			if got, want := j.hs.Sums()[0].Hex, plainSum(SHA256, content); got != want {
				t.Errorf("resumed: %s, want %s", got, want)
			}
			s := j.rb.stats()
			if seen := s.AsArrived + s.Buffered + s.ReadBack; seen != j.f.Size-tc.wantHashed {
				t.Errorf("%d bytes reached the hash after the resume, want %d (%+v)", seen, j.f.Size-tc.wantHashed, s)
			}
			// Kept bytes the hash had not covered are on disk only.
			if kept := 2*partSize + 10000 - tc.wantHashed; s.ReadBack < kept {
				t.Errorf("read back %d bytes, want at least the %d kept beyond the hash state", s.ReadBack, kept)
			}
		})
	}
}
