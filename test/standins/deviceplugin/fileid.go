package deviceplugin

import (
	"os"
	"syscall"
)

// fileID tells one file from another at the same path: a socket removed
// and made again may get the same inode number, but not the same
// modification time. The zero fileID stands for no file.
type fileID struct {
	dev, ino uint64
	mtime    int64 // nanoseconds since the epoch
}

// statID identifies the file at path; the zero fileID if there is none
// (or it cannot be looked at).
func statID(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	id := fileID{mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino //nolint:unconvert // Dev's type differs between platforms
	}
	return id
}

// absent reports whether id stands for no file.
func (id fileID) absent() bool { return id == fileID{} }
