package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// copyBufferSize is each worker's buffer: memory grows with the
// concurrency, never with the model or part size.
const copyBufferSize = 1 << 20

// engine fetches the parts of a plan with a pool of workers.
type engine struct {
	o     *Options
	src   Source
	root  *os.Root
	log   logr.Logger
	sched *scheduler
	dog   *watchdog
	// rb holds bytes of files hashed in order that arrived ahead of their
	// hash.
	rb *reorderBuffer

	fetched atomic.Int64 // bytes read from the source in this run
	written atomic.Int64 // bytes of files on disk, resumed ones included

	// sinceCkpt counts the bytes written since the last checkpoint;
	// ckptDue wakes the checkpointer when it reaches CheckpointBytes.
	sinceCkpt atomic.Int64
	ckptDue   chan struct{}
	// unsynced counts the bytes written that no finished checkpoint
	// covers yet; workers wait while it is over MaxUnsynced, so that a
	// disk slower than the network bounds the dirty page cache and what
	// a kill loses, instead of both growing with the model.
	unsynced atomic.Int64
	syncMu   sync.Mutex
	synced   chan struct{} // closed after each checkpoint round

	mu      sync.Mutex
	results map[string]*doneRecord // by file id
	err     error
	cancel  context.CancelCauseFunc
}

// run fetches every part, verifies and places every file, and returns the
// first failure.
func (e *engine) run(ctx context.Context, jobs []*fileJob, parts []*part) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.cancel = cancel
	e.sched = newScheduler()
	e.dog = newWatchdog(e.o.StallTimeout)
	e.ckptDue = make(chan struct{}, 1)
	e.synced = make(chan struct{})
	go e.dog.run(ctx)
	ckptDone := make(chan struct{})
	go func() {
		defer close(ckptDone)
		e.checkpointer(ctx, jobs)
	}()
	go func() {
		<-ctx.Done()
		e.sched.close()
	}()
	e.sched.push(parts...)

	var wg sync.WaitGroup
	for range max(e.o.Concurrency, 1) {
		wg.Go(func() {
			buf := make([]byte, copyBufferSize)
			for p := e.sched.next(); p != nil; p = e.sched.next() {
				if err := e.part(ctx, p, buf); err != nil {
					e.fail(err)
				}
				e.sched.finished()
			}
		})
	}
	wg.Wait()
	err := e.result(ctx)
	cancel(nil)
	<-ckptDone
	for _, j := range jobs {
		j.close()
	}
	return err
}

// result is the outcome once the workers stopped: the first failure, or
// why the context ended, or nil.
func (e *engine) result(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

func (e *engine) fail(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	e.cancel(err)
}

// part fetches one part, then records it and, when the file is complete,
// verifies and places the file.
func (e *engine) part(ctx context.Context, p *part, buf []byte) error {
	j := p.job
	var sum *partSum
	if p.idx >= 0 {
		var err error
		if sum, err = e.fetch(ctx, p, buf); err != nil {
			return err
		}
	}
	complete, err := j.partDone(p.idx, buf, sum)
	if err != nil || !complete {
		return err
	}
	// The last checkpoint syncs the whole file and records every part: a
	// kill from here on re-fetches nothing.
	if err := j.finalCheckpoint(e.root); err != nil {
		return err
	}
	return e.finish(ctx, j)
}

// fetch reads one part into the partial file, retrying transient
// failures and stalls from where the last attempt stopped. When the file
// is verified part by part it returns what the part's bytes summed to, as
// they arrived (a prefix an earlier run wrote is read back first).
func (e *engine) fetch(ctx context.Context, p *part, buf []byte) (*partSum, error) {
	j := p.job
	got := p.skip
	ps := j.newPartSummer()
	if ps != nil && got > 0 {
		if err := j.readBack(ps.write, p.off, p.off+got, buf); err != nil {
			return nil, fmt.Errorf("%s: reading back: %w", j.f.Path, err)
		}
	}
	if got >= p.n {
		if ps == nil {
			return nil, nil
		}
		return ps.result(), nil
	}
	err := e.o.Retry.Do(ctx, func(ctx context.Context) error {
		if j.f.Sequential && got > 0 {
			e.written.Add(-got)
			got = 0 // no ranges: start again
			if ps != nil {
				ps.reset()
			}
			j.restart()
		}
		rctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		w := e.dog.add(cancel)
		defer e.dog.remove(w)
		rc, err := e.src.Open(rctx, j.f, p.off+got, p.n-got)
		if err != nil {
			return e.requestError(rctx, err)
		}
		defer rc.Close()
		for got < p.n {
			if err := e.throttle(rctx, w); err != nil {
				return e.requestError(rctx, err)
			}
			k, rerr := rc.Read(buf[:min(int64(len(buf)), p.n-got)])
			if k > 0 {
				if _, werr := j.fh.WriteAt(buf[:k], p.off+got); werr != nil {
					return fmt.Errorf("%s: writing: %w", j.f.Path, noSpace(werr))
				}
				if ps != nil {
					ps.write(buf[:k])
				}
				if err := j.arrived(p.idx, p.off+got, buf[:k], got+int64(k)); err != nil {
					return err
				}
				got += int64(k)
				j.dirty.Store(true)
				e.fetched.Add(int64(k))
				e.written.Add(int64(k))
				e.unsynced.Add(int64(k))
				if e.sinceCkpt.Add(int64(k)) >= e.o.CheckpointBytes {
					select {
					case e.ckptDue <- struct{}{}:
					default:
					}
				}
				w.touch()
			}
			if rerr != nil {
				if errors.Is(rerr, io.EOF) && got == p.n {
					break
				}
				if errors.Is(rerr, io.EOF) {
					rerr = Retryable(fmt.Errorf("body ended %d bytes early: %w", p.n-got, io.ErrUnexpectedEOF), 0)
				}
				return e.requestError(rctx, rerr)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: bytes %d-%d: %w", j.f.Path, p.off, p.off+p.n-1, err)
	}
	// Start writing the part to disk now: the next checkpoint's sync, and
	// the file's final one, then have little left to wait for.
	startWriteback(j.fh, p.off, p.n)
	if ps == nil {
		return nil, nil
	}
	return ps.result(), nil
}

// minCheckpointGap bounds how often checkpoints are taken on a fast
// network: a kill re-fetches at most CheckpointBytes, or what arrives in
// this long, whichever is more.
const minCheckpointGap = 100 * time.Millisecond

// checkpointer checkpoints every file in progress every CheckpointEvery,
// or sooner when CheckpointBytes arrived, until ctx ends.
func (e *engine) checkpointer(ctx context.Context, jobs []*fileJob) {
	t := time.NewTicker(e.o.CheckpointEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.ckptDue:
			if err := Sleep(ctx, minCheckpointGap-time.Since(last)); err != nil {
				return
			}
		}
		if e.sinceCkpt.Swap(0) == 0 {
			continue
		}
		covered := e.unsynced.Load()
		last = time.Now()
		// In parallel: a file with much to sync does not hold back the
		// others' checkpoints.
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() {
				if err := j.checkpoint(e.root); err != nil {
					e.fail(err)
				}
			})
		}
		wg.Wait()
		e.unsynced.Add(-covered)
		e.syncMu.Lock()
		close(e.synced)
		e.synced = make(chan struct{})
		e.syncMu.Unlock()
	}
}

// throttle waits while more than MaxUnsynced bytes await a checkpoint.
// Waiting for the disk is not a stall of the source: w is kept alive.
func (e *engine) throttle(ctx context.Context, w *watch) error {
	for e.unsynced.Load() > e.o.MaxUnsynced {
		w.touch()
		e.syncMu.Lock()
		ch := e.synced
		e.syncMu.Unlock()
		select {
		case e.ckptDue <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-ch:
		case <-time.After(e.o.StallTimeout / 4):
		}
	}
	w.touch()
	return nil
}

// requestError says why a request failed: a stall (retried, then a
// timeout), the load's end, or the source's own error.
func (e *engine) requestError(rctx context.Context, err error) error {
	if errors.Is(context.Cause(rctx), errStalled) {
		return Retryable(fmt.Errorf("no data for %s: %w", e.o.StallTimeout, ErrTimeout), 0)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if c := context.Cause(rctx); c != nil {
			return c
		}
	}
	if _, ok := IsTransient(err); ok || Kind(err) != nil {
		return err
	}
	// Network errors from a client without its own classification.
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Retryable(err, 0)
	}
	return err
}

// finish verifies a completely fetched file and moves it (or what its
// archive holds) into place, or fetches it once more after a mismatch.
func (e *engine) finish(ctx context.Context, j *fileJob) error {
	sums := j.hs.Sums()
	err := verifySums(j.f, sums)
	if err == nil {
		err = j.verifyComposite()
	}
	if c := j.composite; c != nil {
		sums = append(sums, Digest{Algorithm: c.Algorithm + CompositeSuffix, Hex: fmt.Sprintf("%s-%d", c.Hex, c.Parts)})
	}
	if err != nil {
		if j.retried {
			return err
		}
		e.log.Info("verification failed, fetching the file again", "file", j.f.Path, "error", err.Error())
		parts, rerr := j.reset(e.root)
		if rerr != nil {
			return rerr
		}
		e.written.Add(-j.f.Size)
		e.sched.push(parts...)
		return nil
	}
	j.close()
	files, err := e.stage(ctx, j, sums)
	if err != nil {
		return err
	}
	rec := &doneRecord{ID: j.id, Archive: j.f.Unpack != ArchiveNone, Files: files}
	if err := writeDone(e.root, rec); err != nil {
		return noSpace(err)
	}
	// Only now that the record is written: a kill before it finds the
	// archive still whole, or the file staged (see unstage).
	_ = e.root.Remove(partialName(j.id))
	_ = e.root.Remove(checkpointName(j.id))
	e.record(rec)
	return nil
}

func (e *engine) record(d *doneRecord) {
	e.mu.Lock()
	e.results[d.ID] = d
	e.mu.Unlock()
}

// stage moves a verified file to the staging area, or extracts its
// archive there: nothing reaches its final path before every file of the
// model is verified.
func (e *engine) stage(ctx context.Context, j *fileJob, sums []Digest) ([]LoadedFile, error) {
	name := partialName(j.id)
	if j.f.Unpack != ArchiveNone {
		if e.o.Extract == nil {
			return nil, fmt.Errorf("%s is a %s archive and this loader cannot extract archives: %w", archiveName(j.f), j.f.Unpack, ErrInvalid)
		}
		dir := path.Join(verifiedDir, j.id)
		_ = e.root.RemoveAll(dir) // an extraction a kill interrupted
		if err := e.root.MkdirAll(dir, 0o755); err != nil {
			return nil, noSpace(err)
		}
		sub, err := e.root.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		defer sub.Close()
		r, err := e.root.Open(name)
		if err != nil {
			return nil, err
		}
		files, err := e.o.Extract(ctx, r, j.f.Unpack, sub, j.f.Path)
		_ = r.Close()
		if err != nil {
			return nil, fmt.Errorf("extracting %s: %w", archiveName(j.f), noSpace(err))
		}
		for i := range files {
			files[i].Verified = verifiable(j.f)
		}
		return files, nil
	}
	lf := LoadedFile{Path: j.f.Path, Size: j.f.Size, Digests: sums, Verified: verifiable(j.f)}
	if j.target != j.f.Path {
		lf.Blob = j.target
	}
	if err := moveInto(e.root, name, stagedName(j.id, false, lf)); err != nil {
		return nil, err
	}
	return []LoadedFile{lf}, nil
}

func archiveName(f *File) string {
	if f.Path == "" {
		return "layer " + f.Key
	}
	return f.Path + " (" + f.Key + ")"
}
