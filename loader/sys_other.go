//go:build !linux

package loader

import (
	"errors"
	"math"
	"os"
	"syscall"
)

func preallocate(f *os.File, size int64) error { return f.Truncate(size) }

func startWriteback(*os.File, int64, int64) {}

func datasync(f *os.File) error { return f.Sync() }

func dropCache(*os.File, int64, int64) {}

func freeSpace(string) (int64, error) { return math.MaxInt64, nil }

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

func fileOwner(os.FileInfo) (uid, gid uint32, ok bool) { return 0, 0, false }
