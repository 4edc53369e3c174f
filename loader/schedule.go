package loader

import (
	"slices"
	"sync"
)

// part is a byte range of a file to fetch.
type part struct {
	job    *fileJob
	idx    int
	off, n int64
	// skip is the prefix of the part an earlier run already wrote.
	skip int64
}

// scheduler hands parts to workers, first listed first, and knows when
// the work is over: nothing pending and no worker busy (a busy worker may
// queue a file again after a failed verification).
type scheduler struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*part
	active  int
	closed  bool
}

func newScheduler() *scheduler {
	s := &scheduler{}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *scheduler) push(ps ...*part) {
	s.mu.Lock()
	s.pending = append(s.pending, ps...)
	s.mu.Unlock()
	s.cond.Broadcast()
}

// next returns the next part and counts its worker busy, or nil when the
// work is over or the scheduler closed.
func (s *scheduler) next() *part {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.closed:
			return nil
		case len(s.pending) > 0:
			p := s.pending[0]
			s.pending[0] = nil
			s.pending = s.pending[1:]
			s.active++
			return p
		case s.active == 0:
			return nil
		}
		s.cond.Wait()
	}
}

// finished says a worker is done with the part next gave it.
func (s *scheduler) finished() {
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	s.cond.Broadcast()
}

// close stops handing out parts.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// interleave hands out the parts of files hashed in order round-robin
// across those files (each file's parts in order, the files in the order
// of their first part), in the places those parts held; other parts keep
// theirs. The workers then spread over the files instead of all fetching
// one, a file has few parts in flight, and more of its bytes arrive where
// its hash is, to be hashed at once rather than read back.
func interleave(parts []*part) []*part {
	var (
		slots  []int
		queues [][]*part
		index  = map[*fileJob]int{}
	)
	for i, p := range parts {
		if !p.job.inOrder() {
			continue
		}
		slots = append(slots, i)
		q, ok := index[p.job]
		if !ok {
			q = len(queues)
			index[p.job] = q
			queues = append(queues, nil)
		}
		queues[q] = append(queues[q], p)
	}
	out := slices.Clone(parts)
	k := 0
	for len(queues) > 0 {
		left := queues[:0]
		for _, q := range queues {
			out[slots[k]] = q[0]
			k++
			if len(q) > 1 {
				left = append(left, q[1:])
			}
		}
		queues = left
	}
	return out
}
