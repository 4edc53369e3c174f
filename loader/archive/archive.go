// Package archive extracts tar archives, plain or compressed with gzip or
// zstd, into a model's destination: OCI image layers and model artifacts
// shipped as tarballs.
//
// Extraction trusts nothing in the archive. Every name is checked with
// loader.CleanPath and every write goes through an *os.Root, so nothing
// lands outside the destination, not even through a symbolic link planted
// there earlier; entries are never written through a link at all. Files
// appear at their final path only whole (written to a temporary file,
// synced, renamed). Links must stay inside the destination; devices and
// FIFOs are refused; permissions are reduced to 0o644 or 0o755. The bytes
// and entries extracted are bounded, so a compression bomb stops with
// loader.ErrVerification.
package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/modelgate/modelgate/loader"
)

// Defaults of Options.
const (
	DefaultTempDir    = loader.StateDir + "/partial"
	DefaultMaxBytes   = int64(2) << 40
	DefaultMaxEntries = 1_000_000
)

// maxZstdWindow bounds the memory a zstd frame may ask for: enough for
// every standard level, --ultra -22 and --long=27.
const maxZstdWindow = 128 << 20

// Options bound and place an extraction.
type Options struct {
	// TempDir is a directory relative to the root where files are
	// written before they are renamed into place; "" is DefaultTempDir.
	// It is created when missing; no entry may be extracted into it.
	TempDir string
	// MaxBytes bounds the bytes extracted in all; 0 is DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries bounds the number of entries; 0 is DefaultMaxEntries.
	MaxEntries int
}

// EntryType is the kind of an extracted entry.
type EntryType string

// The kinds of entries extracted. A hard link is extracted as a file.
const (
	TypeFile    EntryType = "file"
	TypeDir     EntryType = "dir"
	TypeSymlink EntryType = "symlink"
)

// Entry is one entry of the archive as extracted.
type Entry struct {
	// Path is where the entry is, relative to the root: under joined with
	// the entry's cleaned name.
	Path string
	Type EntryType
	// Size is a file's length in bytes.
	Size int64
	// Mode is the permission bits given: 0o644 or 0o755 for a file,
	// 0o755 for a directory, 0o777 for a symbolic link.
	Mode fs.FileMode
	// SHA256 is a file's content digest, as lower-case hex.
	SHA256 string
	// Link is a symbolic link's target, relative and cleaned.
	Link string
}

// Extract reads a tar archive in format from r and extracts it into
// root under the directory under ("" for the root itself, otherwise a
// path loader.CleanPath accepts). It returns the entries extracted, in
// archive order, a later entry of the same path replacing the earlier.
// OCI whiteouts (.wh.<name>, .wh..wh..opq) remove entries that this
// extraction created earlier, and nothing else.
//
// Failures caused by the archive wrap loader.ErrVerification; a failure
// of r itself is returned as it is (a loader.Transient stays one). On
// failure the entries extracted so far are returned with the error; no
// file is left half-written at its final path.
func Extract(ctx context.Context, r io.Reader, format loader.Archive, root *os.Root, under string, opts Options) ([]Entry, error) {
	switch format {
	case loader.ArchiveTar, loader.ArchiveTarGzip, loader.ArchiveTarZstd:
	default:
		return nil, fmt.Errorf("archive format %q is not one of %s, %s, %s: %w",
			format, loader.ArchiveTar, loader.ArchiveTarGzip, loader.ArchiveTarZstd, loader.ErrInvalid)
	}
	e, err := newExtractor(ctx, root, under, opts)
	if err != nil {
		return nil, err
	}
	src := &source{ctx: ctx, r: r}
	dec, err := decompress(src, format)
	if err != nil {
		return nil, e.readErr(src, err)
	}
	defer func() { _ = dec.Close() }()
	err = e.run(src, dec, format != loader.ArchiveTar)
	if err == nil {
		err = e.syncDirs()
	}
	return e.result(), err
}

// newExtractor checks the arguments and makes the temporary directory.
func newExtractor(ctx context.Context, root *os.Root, under string, opts Options) (*extractor, error) {
	if under != "" {
		if _, err := loader.CleanPath(under); err != nil {
			return nil, fmt.Errorf("extracting under %q: %w", under, err)
		}
	}
	if opts.TempDir == "" {
		opts.TempDir = DefaultTempDir
	}
	if t := opts.TempDir; path.IsAbs(t) || path.Clean(t) != t || t == "." || t == ".." || strings.HasPrefix(t, "../") {
		return nil, fmt.Errorf("temporary directory %q must be a clean path relative to the root: %w", t, loader.ErrInvalid)
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if err := root.MkdirAll(opts.TempDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the temporary directory %s: %w", opts.TempDir, fsErr(err))
	}
	return &extractor{
		ctx:      ctx,
		root:     root,
		under:    under,
		opts:     opts,
		index:    map[string]int{},
		created:  map[string]bool{},
		realDirs: map[string]bool{},
		kids:     map[string]map[string]bool{},
		toSync:   map[string]bool{},
		buf:      make([]byte, 1<<20),
	}, nil
}

// decompress wraps src in the format's decompressor (none for plain tar).
func decompress(src io.Reader, format loader.Archive) (io.ReadCloser, error) {
	switch format {
	case loader.ArchiveTarGzip:
		return gzip.NewReader(src)
	case loader.ArchiveTarZstd:
		d, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	default:
		return io.NopCloser(src), nil
	}
}

// extractor is one extraction's state.
type extractor struct {
	ctx   context.Context
	root  *os.Root
	under string
	opts  Options

	// entries are the entries extracted, nil where one was replaced or
	// removed; index maps a path to its entry.
	entries []*Entry
	index   map[string]int
	// created are the directories this extraction made, named or as
	// parents: whiteouts may remove them.
	created map[string]bool
	// realDirs are directories seen to be directories, not links.
	realDirs map[string]bool
	// kids are the entries and directories (made or seen) under each
	// directory, for whiteouts.
	kids map[string]map[string]bool
	// toSync are the directories entries were renamed into.
	toSync map[string]bool

	written int64 // bytes written
	count   int   // entries read
	buf     []byte
}

// run extracts every entry, then, when drain, reads what follows the
// archive so that the compressed stream's checksum is verified.
func (e *extractor) run(src *source, dec io.Reader, drain bool) error {
	in := &counter{r: dec}
	tr := tar.NewReader(in)
	for {
		if err := e.ctx.Err(); err != nil {
			return fmt.Errorf("extracting: %w", context.Cause(e.ctx))
		}
		before := in.n
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// archive/tar also ends at an end of input between entries;
			// only the two zero blocks of the end marker prove the
			// archive whole.
			if in.n-before < 2*blockSize {
				return e.readErr(src, fmt.Errorf("no end-of-archive marker: %w", io.ErrUnexpectedEOF))
			}
			break
		}
		if err != nil {
			return e.readErr(src, err)
		}
		if e.count++; e.count > e.opts.MaxEntries {
			return fmt.Errorf("archive has more than %d entries: %w", e.opts.MaxEntries, loader.ErrVerification)
		}
		if err := e.entry(src, hdr, tr); err != nil {
			return err
		}
	}
	if !drain {
		return nil // a plain tar: what follows is not ours to read
	}
	left := e.opts.MaxBytes - e.written
	n, err := io.CopyBuffer(io.Discard, io.LimitReader(dec, left+1), e.buf)
	if err != nil {
		return e.readErr(src, err)
	}
	if n > left {
		return e.tooBig()
	}
	return nil
}

func (e *extractor) tooBig() error {
	return fmt.Errorf("archive expands to more than %d bytes: %w", e.opts.MaxBytes, loader.ErrVerification)
}

// readErr explains a failure to read the archive: the source's own
// failure or the context's end as they are, anything else as a
// malformed archive.
func (e *extractor) readErr(src *source, err error) error {
	if e.ctx.Err() != nil {
		return fmt.Errorf("extracting: %w", context.Cause(e.ctx))
	}
	if serr := src.failure(); serr != nil {
		return fmt.Errorf("reading the archive: %w", serr)
	}
	return fmt.Errorf("archive is malformed or truncated: %w: %w", err, loader.ErrVerification)
}

// result is the entries extracted, in order.
func (e *extractor) result() []Entry {
	out := make([]Entry, 0, len(e.entries))
	for _, en := range e.entries {
		if en != nil {
			out = append(out, *en)
		}
	}
	return out
}

// record adds en, replacing an earlier entry of its path.
func (e *extractor) record(en *Entry) {
	if i, ok := e.index[en.Path]; ok {
		e.entries[i] = nil
	}
	e.index[en.Path] = len(e.entries)
	e.entries = append(e.entries, en)
	e.track(en.Path)
}

// syncDirs fsyncs the directories files were renamed into, so that the
// renames survive a crash.
func (e *extractor) syncDirs() error {
	dirs := make([]string, 0, len(e.toSync))
	for d := range e.toSync {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		f, err := e.root.Open(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by a whiteout
		}
		if err != nil {
			return fmt.Errorf("syncing %s: %w", d, fsErr(err))
		}
		_ = f.Sync() // some filesystems refuse fsync on a directory
		_ = f.Close()
	}
	return nil
}

// blockSize is tar's block size.
const blockSize = 512

// counter counts the bytes read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// source reads the archive, ending when ctx does, and keeps its own
// failure apart from the decompressor's and tar's.
type source struct {
	ctx context.Context
	r   io.Reader

	mu  sync.Mutex
	err error
}

func (s *source) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, context.Cause(s.ctx)
	}
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}
	return n, err
}

func (s *source) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// fsErr marks a full disk as loader.ErrNoSpace.
func fsErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", err, loader.ErrNoSpace)
	}
	return err
}
