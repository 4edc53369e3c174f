package archive

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/modelgate/modelgate/loader"
)

// refuse is the error for an entry the archive may not hold.
func refuse(hdrName, why string) error {
	return fmt.Errorf("archive entry %.200q %s: %w", hdrName, why, loader.ErrVerification)
}

// typeNames name the entry types that are refused.
var typeNames = map[byte]string{
	tar.TypeChar:  "a character device",
	tar.TypeBlock: "a block device",
	tar.TypeFifo:  "a FIFO",
	tar.TypeCont:  "a contiguous file",
}

// entry extracts one entry whose content body yields.
func (e *extractor) entry(src *source, hdr *tar.Header, body io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // pax global header: metadata only
	}
	name := trimName(hdr.Name)
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the archive's root, "./"
		}
		return refuse(hdr.Name, "has no name")
	}
	full, err := e.place(hdr.Name, name)
	if err != nil {
		return err
	}
	if dir, base := path.Split(full); strings.HasPrefix(base, whiteoutPrefix) {
		return e.whiteout(hdr.Name, path.Clean(dir), base)
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		return e.file(src, hdr, full, body)
	case tar.TypeDir:
		return e.dir(hdr.Name, full)
	case tar.TypeSymlink:
		return e.symlink(hdr, full)
	case tar.TypeLink:
		return e.hardlink(hdr, full)
	}
	what, ok := typeNames[hdr.Typeflag]
	if !ok {
		what = fmt.Sprintf("of unknown type %q", hdr.Typeflag)
	}
	return refuse(hdr.Name, "is "+what+": only files, directories and links are extracted")
}

// trimName strips the "./" and "/" an entry's name may begin with.
func trimName(name string) string {
	for {
		t := strings.TrimLeft(strings.TrimPrefix(name, "./"), "/")
		if t == name {
			break
		}
		name = t
	}
	if name == "." {
		return ""
	}
	return name
}

// maxSegment is the longest file name most filesystems allow.
const maxSegment = 255

// place checks a trimmed entry name and returns its path relative to the
// root.
func (e *extractor) place(hdrName, name string) (string, error) {
	rel, err := loader.CleanPath(name)
	if err != nil {
		return "", refuse(hdrName, "is not a safe path: "+reason(err))
	}
	full := path.Join(e.under, rel)
	if _, err := loader.CleanPath(full); err != nil {
		return "", refuse(hdrName, "is not a safe path: "+reason(err))
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if len(seg) > maxSegment {
			return "", refuse(hdrName, fmt.Sprintf("has a name longer than %d bytes", maxSegment))
		}
	}
	if t := e.opts.TempDir; full == t || strings.HasPrefix(full, t+"/") {
		return "", refuse(hdrName, "is inside the temporary directory "+t)
	}
	return full, nil
}

// reason is a loader.CleanPath error's message without its sentinel: the
// archive's names are the archive's fault, not the user's.
func reason(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+loader.ErrInvalid.Error())
}

// fileMode reduces a tar mode to 0o755 when anyone may execute, else
// 0o644: no setuid, setgid or sticky bit, never writable by others.
func fileMode(m int64) fs.FileMode {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// tempName is a fresh name in the temporary directory.
func (e *extractor) tempName() string {
	return path.Join(e.opts.TempDir, "extract-"+rand.Text()+".tmp")
}

// file writes a regular file through a temporary one: written, synced,
// then renamed into place.
func (e *extractor) file(src *source, hdr *tar.Header, full string, body io.Reader) error {
	left := e.opts.MaxBytes - e.written
	if hdr.Size < 0 || hdr.Size > left {
		return e.tooBig()
	}
	if err := e.parents(hdr.Name, path.Dir(full)); err != nil {
		return err
	}
	tmp := e.tempName()
	f, err := e.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("extracting %s: %w", full, fsErr(err))
	}
	h := sha256.New()
	n, err := e.copy(src, f, h, body, left, full)
	if err == nil {
		err = e.finish(f, fileMode(hdr.Mode), hdr.Name, tmp, full)
	}
	if err != nil {
		_ = f.Close()
		_ = e.root.Remove(tmp)
		return err
	}
	e.record(&Entry{Path: full, Type: TypeFile, Size: n, Mode: fileMode(hdr.Mode), SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// copy copies body to f and h, at most left bytes.
func (e *extractor) copy(src *source, f *os.File, h hash.Hash, body io.Reader, left int64, full string) (int64, error) {
	var n int64
	for {
		k, rerr := body.Read(e.buf)
		if k > 0 {
			if n += int64(k); n > left {
				return n, e.tooBig()
			}
			e.written += int64(k)
			if _, err := f.Write(e.buf[:k]); err != nil {
				return n, fmt.Errorf("extracting %s: %w", full, fsErr(err))
			}
			h.Write(e.buf[:k])
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return n, e.readErr(src, rerr)
		}
	}
}

// finish sets a temporary file's mode, syncs and closes it, and renames
// it to full.
func (e *extractor) finish(f *os.File, mode fs.FileMode, hdrName, tmp, full string) error {
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("extracting %s: %w", full, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("extracting %s: %w", full, fsErr(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("extracting %s: %w", full, fsErr(err))
	}
	return e.rename(hdrName, tmp, full)
}

// rename moves a finished temporary entry to full. A directory at full
// is never replaced.
func (e *extractor) rename(hdrName, tmp, full string) error {
	if fi, err := e.root.Lstat(full); err == nil && fi.IsDir() {
		return refuse(hdrName, fmt.Sprintf("would replace the directory %s", full))
	}
	if err := e.root.Rename(tmp, full); err != nil {
		return fmt.Errorf("extracting %s: %w", full, fsErr(err))
	}
	// When full was already a hard link to tmp's file, rename leaves tmp.
	_ = e.root.Remove(tmp)
	e.toSync[path.Dir(full)] = true
	return nil
}

// dir makes a directory, or accepts one that is there.
func (e *extractor) dir(hdrName, full string) error {
	if err := e.parents(hdrName, full); err != nil {
		return err
	}
	e.record(&Entry{Path: full, Type: TypeDir, Mode: 0o755})
	return nil
}

// parents makes sure dir and its parents are directories, not links,
// making those missing.
func (e *extractor) parents(hdrName, dir string) error {
	if dir == "." || e.realDirs[dir] {
		return nil
	}
	if err := e.parents(hdrName, path.Dir(dir)); err != nil {
		return err
	}
	fi, err := e.root.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := e.root.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("extracting %s: %w", dir, fsErr(err))
		}
		e.created[dir] = true
		e.toSync[path.Dir(dir)] = true
	case err != nil:
		return fmt.Errorf("extracting %s: %w", dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse(hdrName, fmt.Sprintf("needs %s to be a directory, but it is a symbolic link: entries are not written through links", dir))
	case !fi.IsDir():
		return refuse(hdrName, fmt.Sprintf("needs %s to be a directory, but it is a file", dir))
	}
	e.realDirs[dir] = true
	e.track(dir)
	return nil
}

// symlink makes a symbolic link whose target, joined to the link's
// directory, stays inside the root.
func (e *extractor) symlink(hdr *tar.Header, full string) error {
	link := hdr.Linkname
	switch {
	case link == "":
		return refuse(hdr.Name, "is a symbolic link without a target")
	case path.IsAbs(link):
		return refuse(hdr.Name, fmt.Sprintf("is a symbolic link to %.200q: targets must be relative", link))
	case strings.ContainsAny(link, "\x00\\"):
		return refuse(hdr.Name, fmt.Sprintf("is a symbolic link to %.200q: targets must not contain NUL or backslash", link))
	}
	link = path.Clean(link)
	if _, err := loader.CleanPath(path.Join(path.Dir(full), link)); err != nil { //nolint:gosec // this is the traversal check: CleanPath refuses a target outside the model
		return refuse(hdr.Name, fmt.Sprintf("is a symbolic link to %.200q, which leaves the model: %s", hdr.Linkname, reason(err)))
	}
	if err := e.parents(hdr.Name, path.Dir(full)); err != nil {
		return err
	}
	tmp := e.tempName()
	if err := e.root.Symlink(link, tmp); err != nil {
		return fmt.Errorf("extracting %s: %w", full, fsErr(err))
	}
	if err := e.rename(hdr.Name, tmp, full); err != nil {
		_ = e.root.Remove(tmp)
		return err
	}
	e.record(&Entry{Path: full, Type: TypeSymlink, Mode: 0o777, Link: link})
	return nil
}

// hardlink links full to an earlier file of the archive, or copies it
// where the filesystem cannot link.
func (e *extractor) hardlink(hdr *tar.Header, full string) error {
	name := trimName(hdr.Linkname)
	rel, err := loader.CleanPath(name)
	if err != nil {
		return refuse(hdr.Name, fmt.Sprintf("is a hard link to %.200q, which is not a safe path: %s", hdr.Linkname, reason(err)))
	}
	target := path.Join(e.under, rel)
	i, ok := e.index[target]
	if !ok || e.entries[i] == nil || e.entries[i].Type != TypeFile {
		return refuse(hdr.Name, fmt.Sprintf("is a hard link to %.200q, which is not a file earlier in the archive", hdr.Linkname))
	}
	if target == full {
		return nil
	}
	if err := e.parents(hdr.Name, path.Dir(full)); err != nil {
		return err
	}
	orig := *e.entries[i]
	tmp := e.tempName()
	if err := e.root.Link(target, tmp); err != nil {
		if err := e.copyFile(target, tmp, orig.Mode); err != nil {
			_ = e.root.Remove(tmp)
			return fmt.Errorf("extracting %s: %w", full, err)
		}
	}
	if err := e.rename(hdr.Name, tmp, full); err != nil {
		_ = e.root.Remove(tmp)
		return err
	}
	e.record(&Entry{Path: full, Type: TypeFile, Size: orig.Size, Mode: orig.Mode, SHA256: orig.SHA256})
	return nil
}

// copyFile copies an extracted file to tmp, counting its bytes.
func (e *extractor) copyFile(from, tmp string, mode fs.FileMode) error {
	in, err := e.root.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := e.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsErr(err)
	}
	left := e.opts.MaxBytes - e.written
	n, err := io.CopyBuffer(out, io.LimitReader(in, left+1), e.buf)
	e.written += n
	switch {
	case err != nil:
		err = fsErr(err)
	case n > left:
		err = e.tooBig()
	default:
		err = out.Chmod(mode)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
