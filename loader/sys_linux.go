//go:build linux

package loader

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// preallocate reserves size bytes for f, so that a full disk shows at the
// start rather than in the middle; filesystems without fallocate get a
// sparse file of that size.
func preallocate(f *os.File, size int64) error {
	if size == 0 {
		return nil
	}
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return err
	}
	return f.Truncate(size)
}

// startWriteback asks the kernel to start writing the range to disk now,
// without waiting: by the time the file is synced, little is left to wait
// for, and the pages become clean, so dropCache can release them.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// datasync flushes f's data to stable storage.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// dropCache tells the kernel the range's pages are not needed again, so
// written model bytes do not sit in page cache charged to the loader's
// memory limit. Only clean pages go: call it after datasync.
func dropCache(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}

// freeSpace returns the bytes available to an unprivileged writer in the
// filesystem holding dir.
func freeSpace(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil //nolint:gosec // block counts fit int64
}

// isNoSpace reports a full disk or exhausted quota.
func isNoSpace(err error) bool { return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) }

// fileOwner is a file's owner and group.
func fileOwner(info os.FileInfo) (uid, gid uint32, ok bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}
