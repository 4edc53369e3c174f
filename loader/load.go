package loader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Extractor extracts an archive read from r into root under dir, writing
// each file so that it appears only when whole, and returns what it
// extracted. `modelgate load` passes archive.Extract.
type Extractor func(ctx context.Context, r io.Reader, format Archive, root *os.Root, dir string) ([]LoadedFile, error)

// Options configure a load. Zero values take the defaults below.
type Options struct {
	// Dest is the destination directory; created when missing.
	Dest string
	// URI is the model as the user named it, recorded in the manifest; a
	// manifest of the same URI is a cache hit.
	URI string
	// Concurrency is the number of parts fetched at once (default 16).
	Concurrency int
	// PartSize is the size of a ranged read (default 16 MiB).
	PartSize int64
	// CheckpointBytes and CheckpointEvery say when a file's progress is
	// synced and recorded: after this many new bytes on disk or this long,
	// whichever comes first (default 32 MiB, 2 s), for every file in
	// progress at once.
	CheckpointBytes int64
	CheckpointEvery time.Duration
	// MaxUnsynced bounds the bytes written but not yet synced and
	// recorded: fetching pauses above it (default 4 × CheckpointBytes).
	// A disk slower than the network then paces the load, and neither the
	// dirty page cache nor what a kill loses grows with the model.
	MaxUnsynced int64
	// ReorderBytes bounds the memory that holds bytes of files hashed in
	// order (SHA-256, SHA-1, MD5) that arrived ahead of their hash (default
	// 1 MiB per worker: 16 MiB at the default Concurrency), in slabs of
	// 256 KiB; bytes it cannot hold are read back from disk. Negative:
	// none, every byte ahead of its hash is read back.
	ReorderBytes int64
	// StallTimeout cancels and retries a request that receives no byte
	// for this long (default 60 s).
	StallTimeout time.Duration
	// Retry is the policy for listings and parts (default DefaultRetry).
	Retry RetryPolicy
	// Host identifies this Pod (`modelgate load` passes the Pod's UID; the
	// default is the host name) and Holder this loader (default Host and a
	// random suffix) in the lock: a holder with this loader's Host is this
	// Pod's earlier, dead loader.
	Host, Holder string
	// TakeoverAfter is how long a holder may make no progress before a
	// waiting loader takes over (default 3 minutes).
	TakeoverAfter time.Duration
	// PollEvery is how often a waiting loader looks again (default 1 s).
	PollEvery time.Duration
	// ProgressEvery is how often progress is logged (default 5 s); Progress,
	// when set, is called at the same times.
	ProgressEvery time.Duration
	Progress      func(Progress)
	// Extract extracts archives (OCI tar layers); nil refuses them.
	Extract Extractor
	// Version is the loader's version, recorded in the manifest.
	Version string
}

func (o *Options) defaults() error {
	if o.Dest == "" {
		return fmt.Errorf("the destination must be set: %w", ErrInvalid)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.PartSize <= 0 {
		o.PartSize = 16 << 20
	}
	if o.CheckpointBytes <= 0 {
		o.CheckpointBytes = 32 << 20
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = 2 * time.Second
	}
	if o.MaxUnsynced <= 0 {
		o.MaxUnsynced = 4 * o.CheckpointBytes
	}
	if o.ReorderBytes == 0 {
		o.ReorderBytes = int64(o.Concurrency) * reorderPerWorker
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = time.Minute
	}
	if o.Retry.Attempts == 0 {
		o.Retry = DefaultRetry
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.Holder == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Holder = o.Host + "-" + hex.EncodeToString(b)
	}
	if o.TakeoverAfter <= 0 {
		o.TakeoverAfter = 3 * time.Minute
	}
	if o.PollEvery <= 0 {
		o.PollEvery = time.Second
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 5 * time.Second
	}
	return nil
}

// Result is the outcome of a load.
type Result struct {
	URI      string
	Revision string
	// Files and Bytes are the model's, fetched or not.
	Files int
	Bytes int64
	// Fetched is what this run read from the source; Resumed what an
	// earlier, interrupted run had already put on disk.
	Fetched, Resumed int64
	// Verified counts the files checked against a digest the source
	// vouched for; the others were only checked for size.
	Verified int
	// InOrder says how the bytes of files hashed in order reached their
	// hash, and what the reorder buffer held.
	InOrder InOrderStats
	Elapsed time.Duration
	// CacheHit says the destination already held the model (a matching,
	// intact manifest): nothing was fetched. Waited says another loader
	// fetched it while this one waited.
	CacheHit, Waited bool
	Layout           string
}

// Load puts the model src lists into o.Dest: every file fetched,
// verified and moved to its final path, then the manifest written. A
// destination already holding this URI's manifest returns at once, with
// no call to src.
func Load(ctx context.Context, src Source, o Options) (*Result, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	log := logr.FromContextOrDiscard(ctx)
	if err := os.MkdirAll(o.Dest, 0o755); err != nil { //nolint:gosec // the serving container, another user, reads the model
		return nil, destinationError(o.Dest, noSpace(err))
	}
	root, err := os.OpenRoot(o.Dest)
	if err != nil {
		return nil, destinationError(o.Dest, err)
	}
	defer root.Close()
	if err := root.MkdirAll(partialDir, 0o755); err != nil {
		return nil, destinationError(o.Dest, noSpace(err))
	}
	if err := root.MkdirAll(doneDir, 0o755); err != nil {
		return nil, destinationError(o.Dest, noSpace(err))
	}

	hit := func() *Manifest {
		m, err := readManifest(root)
		if err != nil || m == nil || m.URI != o.URI {
			return nil
		}
		if err := m.intact(root); err != nil {
			log.Info("the manifest's files are not all in place; loading again", "error", err.Error())
			return nil
		}
		return m
	}
	if m := hit(); m != nil {
		return hitResult(m, start, false), nil
	}
	lease, m, err := acquire(ctx, root, &o, hit)
	if err != nil {
		return nil, err
	}
	if m != nil {
		return hitResult(m, start, true), nil
	}
	defer lease.release()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := &loadRun{o: &o, src: src, root: root, lease: lease, log: log, start: start,
		eng: &engine{o: &o, src: src, root: root, log: log, results: map[string]*doneRecord{},
			rb: newReorderBuffer(o.ReorderBytes, reorderSlab)}}
	l.phase.Store("listing")
	go l.report(ctx, cancel)
	res, err := l.run(ctx)
	if err != nil {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) && !errors.Is(err, c) {
			err = fmt.Errorf("%w: %w", err, c)
		}
		return nil, err
	}
	return res, nil
}

func hitResult(m *Manifest, start time.Time, waited bool) *Result {
	r := &Result{URI: m.URI, Revision: m.Revision, Files: len(m.Files), Bytes: m.Bytes, Elapsed: time.Since(start),
		CacheHit: !waited, Waited: waited, Layout: m.Layout}
	for _, f := range m.Files {
		if f.Verified {
			r.Verified++
		}
	}
	return r
}

// loadRun is one holder's load.
type loadRun struct {
	o     *Options
	src   Source
	root  *os.Root
	lease *lease
	log   logr.Logger
	start time.Time
	eng   *engine
	total atomic.Int64
	phase atomic.Value // string
}

func (l *loadRun) run(ctx context.Context) (*Result, error) {
	var listing *Listing
	err := l.o.Retry.Do(ctx, func(ctx context.Context) error {
		var err error
		listing, err = l.src.List(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	p, err := makePlan(listing)
	if err != nil {
		return nil, err
	}
	old, _ := readManifest(l.root)
	// From here the destination changes: it is not complete until the
	// new manifest is written.
	if err := removeManifest(l.root); err != nil {
		return nil, err
	}
	l.phase.Store("preparing")
	jobs, parts, resumed, err := l.prepare(p)
	if err != nil {
		return nil, err
	}
	l.total.Store(p.bytes)
	l.eng.written.Store(resumed)
	l.log.Info("loading", "uri", l.o.URI, "revision", listing.Revision, "files", len(p.files), "bytes", p.bytes,
		"toFetch", p.bytes-resumed, "concurrency", l.o.Concurrency, "partSize", l.o.PartSize)
	l.phase.Store("fetching")
	if err := l.eng.run(ctx, jobs, parts); err != nil {
		return nil, err
	}
	st := l.eng.rb.stats()
	if st.AsArrived+st.Buffered+st.ReadBack > 0 {
		l.log.Info("hashed in order", "asArrived", st.AsArrived, "fromBuffer", st.Buffered, "readBack", st.ReadBack,
			"bufferPeak", st.BufferPeak, "bufferBound", st.BufferBound)
	}
	l.phase.Store("placing")
	m, err := l.complete(p, listing)
	if err != nil {
		return nil, err
	}
	if old != nil {
		removeStale(l.root, old, m)
	}
	res := hitResult(m, l.start, false)
	res.CacheHit = false
	res.Fetched, res.Resumed, res.InOrder = l.eng.fetched.Load(), resumed, st
	return res, nil
}

// prepare skips the files an earlier run finished, checks the room the
// others need, opens their partial files, and returns the jobs, their
// parts and the bytes already on disk.
func (l *loadRun) prepare(p *plan) ([]*fileJob, []*part, int64, error) {
	var (
		jobs    []*fileJob
		parts   []*part
		resumed int64
		need    int64
	)
	for _, pf := range p.files {
		if d := readDone(l.root, pf.id); d != nil && doneIntact(l.root, d) == nil {
			l.eng.record(d)
			resumed += pf.f.Size
			continue
		}
		if err := unstage(l.root, pf.id, pf.f); err != nil {
			return nil, nil, 0, fmt.Errorf("%s: %w", pf.f.Path, err)
		}
		j := newFileJob(pf.f, pf.id, pf.target, l.o.PartSize)
		j.rb = l.eng.rb
		jobs = append(jobs, j)
		if pf.f.Unpack != ArchiveNone {
			need += pf.f.Size // what the archive holds: a guess, compression varies
		}
		// A partial file from an earlier run is preallocated already.
		if fi, err := l.root.Stat(partialName(pf.id)); err != nil || fi.Size() != pf.f.Size {
			need += pf.f.Size
		}
	}
	if err := checkSpace(l.o.Dest, need); err != nil {
		return nil, nil, 0, err
	}
	for i, j := range jobs {
		todo, have, err := j.open(l.root)
		if err != nil {
			for _, j := range jobs[:i+1] {
				j.close()
			}
			return nil, nil, 0, fmt.Errorf("%s: %w", j.f.Path, noSpace(err))
		}
		resumed += have
		if len(todo) == 0 {
			// Every part on disk but the file not finished: hash and place it.
			todo = []*part{{job: j, idx: -1}}
		}
		parts = append(parts, todo...)
	}
	return jobs, interleave(parts), resumed, nil
}

// doneIntact checks that a finished file is still where its record says:
// staged, or already moved to its final path.
func doneIntact(root *os.Root, d *doneRecord) error {
	for _, f := range d.Files {
		if f.Link != "" {
			continue
		}
		fi, err := root.Lstat(stagedName(d.ID, d.Archive, f))
		if err != nil {
			fi, err = root.Lstat(f.content())
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Size() != f.Size {
			return fmt.Errorf("%s changed", f.content())
		}
	}
	return nil
}

// complete lays out the hf cache's links, writes the manifest and cleans
// the staging area.
func (l *loadRun) complete(p *plan, listing *Listing) (*Manifest, error) {
	m := &Manifest{Version: ManifestVersion, URI: l.o.URI, Revision: listing.Revision, Layout: LayoutPlain,
		Loader: l.o.Version, Completed: time.Now().UTC()}
	// Every file is verified: move them all to their final paths.
	for _, pf := range p.files {
		d := l.eng.results[pf.id]
		if d == nil {
			return nil, fmt.Errorf("%s was not loaded", pf.f.Path)
		}
		for _, f := range d.Files {
			staged := stagedName(d.ID, d.Archive, f)
			if _, err := l.root.Lstat(staged); err == nil {
				if err := moveInto(l.root, staged, f.content()); err != nil {
					return nil, err
				}
			} else if _, err := l.root.Lstat(f.content()); err != nil {
				return nil, fmt.Errorf("%s is neither staged nor in place: %w", f.Path, err)
			}
		}
		m.Files = append(m.Files, d.Files...)
	}
	sort.Slice(m.Files, func(a, b int) bool { return m.Files[a].Path < m.Files[b].Path })
	for _, f := range m.Files {
		m.Bytes += f.Size
	}
	if p.hf != nil {
		m.Layout, m.HF = LayoutHFCache, &p.hf.repo
		if err := p.hf.link(l.root, m.Files); err != nil {
			return nil, err
		}
	}
	if err := writeManifest(l.root, m); err != nil {
		return nil, noSpace(err)
	}
	for _, d := range []string{partialDir, doneDir, verifiedDir} {
		_ = l.root.RemoveAll(d)
	}
	return m, nil
}

// removeStale removes the files of an earlier manifest (another URI in
// the same destination) that the new one does not have.
func removeStale(root *os.Root, old, cur *Manifest) {
	keep := map[string]bool{}
	for _, f := range cur.Files {
		keep[f.Path], keep[f.content()] = true, true
	}
	for _, f := range old.Files {
		for _, name := range []string{f.Path, f.content()} {
			if !keep[name] {
				_ = root.Remove(name)
			}
		}
	}
	if old.HF != nil && (cur.HF == nil || cur.HF.ID != old.HF.ID) {
		_ = root.RemoveAll(path.Join(HFCacheDir, hfDirName(old.HF.ID)))
	}
}
