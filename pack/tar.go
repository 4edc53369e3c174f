package pack

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/modelgate/modelgate/internal/ctxio"
)

// epoch is every entry's modification time.
var epoch = time.Unix(0, 0)

// copyBuffer is the size of the reads from a file into the tar stream.
const copyBuffer = 1 << 20

// header is an entry's tar header, in the image's normal form: owner
// root, no user or group names, the epoch for a time, 0644 or 0755 for a
// file (0755 when the file had any execute bit), 0755 for a directory,
// and the PAX format (USTAR headers, with PAX records only where USTAR
// cannot say it: long names, files of 8 GiB and more).
func header(e entry) *tar.Header {
	h := &tar.Header{Name: e.name, ModTime: epoch, Format: tar.FormatPAX}
	switch e.kind {
	case kindDir:
		h.Typeflag, h.Name, h.Mode = tar.TypeDir, e.name+"/", 0o755
	case kindFile:
		h.Typeflag, h.Size, h.Mode = tar.TypeReg, e.size, 0o644
		if e.exec {
			h.Mode = 0o755
		}
	case kindSymlink:
		h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
	}
	return h
}

// writeTar writes the tar stream of entries, reading the files from dir,
// into w. A file whose type or size changed since it was listed is an
// error naming it: the stream would no longer be the one hashed.
func writeTar(ctx context.Context, w io.Writer, dir string, entries []entry) error {
	tw := tar.NewWriter(w)
	buf := make([]byte, copyBuffer)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := tw.WriteHeader(header(e)); err != nil {
			return fmt.Errorf("%s: %w", e.name, err)
		}
		if e.kind != kindFile {
			continue
		}
		if err := copyFile(ctx, tw, dir, e, buf); err != nil {
			return err
		}
	}
	return tw.Close()
}

// errChanged says a file changed while it was being packed.
var errChanged = errors.New("changed while it was being packed")

// copyFile copies the file of e, opened inside dir (no symbolic link
// leads out of it), into tw.
func copyFile(ctx context.Context, tw io.Writer, dir string, e entry, buf []byte) error {
	f, err := os.OpenInRoot(dir, e.name)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Size() != e.size {
		return fmt.Errorf("%s: %w (was a file of %d bytes)", e.name, errChanged, e.size)
	}
	n, err := io.CopyBuffer(tw, io.LimitReader(ctxio.Reader(ctx, f), e.size), buf)
	if err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	if n != e.size {
		return fmt.Errorf("%s: %w (read %d of %d bytes)", e.name, errChanged, n, e.size)
	}
	return nil
}
