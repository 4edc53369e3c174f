package loader

import "sync"

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
