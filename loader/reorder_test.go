package loader_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// TestReorderBufferBound holds the first part of a SHA-256 file until every
// other part of it is on disk: all of them arrive ahead of the hash. The
// reorder buffer fills to its bound and no further, the bytes it cannot
// hold are read back once the first part arrives, and the file is
// verified.
func TestReorderBufferBound(t *testing.T) {
	const (
		size = 8 << 20
		// Parts of three quarters of a slab: the bytes within reach of the
		// hash need more slabs than the buffer has.
		partSize = 192 << 10
		bound    = 1 << 20 // four slabs of 256 KiB
	)
	files := map[string]loadertest.Content{
		"model.safetensors": loadertest.Generated(21, size),
		"config.json":       loadertest.Bytes([]byte(`{"a":1}`)),
	}
	srv := loadertest.NewServer(files)
	defer srv.Close()
	src := &firstPartLast{Source: srv.Source(nil), path: "model.safetensors", others: (size+partSize-1)/partSize - 1, all: make(chan struct{})}
	o := fastOptions(t.TempDir(), "https://x/m")
	o.PartSize, o.ReorderBytes, o.StallTimeout = partSize, bound, 30*time.Second
	res, err := loader.Load(context.Background(), src, o)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(files), sums(t, o.Dest)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	st := res.InOrder
	t.Logf("%+v", st)
	if st.BufferBound != bound || st.BufferPeak != bound {
		t.Errorf("buffer peak %d of a bound of %d, want the bound %d reached and not passed", st.BufferPeak, st.BufferBound, bound)
	}
	if st.Buffered == 0 || st.ReadBack == 0 || st.AsArrived < partSize {
		t.Errorf("%d bytes hashed as they arrived, %d from the buffer, %d read back: want the first part as it arrived, and both others",
			st.AsArrived, st.Buffered, st.ReadBack)
	}
	if got, want := st.AsArrived+st.Buffered+st.ReadBack, total(files); got != want {
		t.Errorf("%d bytes reached the hashes, want each of the %d once", got, want)
	}
}

// firstPartLast opens the first part of the file at path only once its
// other parts were read and closed.
type firstPartLast struct {
	loader.Source
	path   string
	others int
	mu     sync.Mutex
	closed int
	all    chan struct{}
}

func (s *firstPartLast) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	if f.Path != s.path {
		return s.Source.Open(ctx, f, off, n)
	}
	if off == 0 {
		select {
		case <-s.all:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return s.Source.Open(ctx, f, off, n)
	}
	rc, err := s.Source.Open(ctx, f, off, n)
	if err != nil {
		return nil, err
	}
	return &onClose{ReadCloser: rc, done: s.closedOne}, nil
}

func (s *firstPartLast) closedOne() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed++; s.closed == s.others {
		close(s.all)
	}
}

type onClose struct {
	io.ReadCloser
	done func()
}

func (c *onClose) Close() error {
	err := c.ReadCloser.Close()
	c.done()
	return err
}
