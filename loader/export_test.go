package loader

import (
	"os"
	"path"
)

// Staged puts a loaded file back in the state a kill leaves between
// staging it and writing its done record: the verified file in the
// staging area, its last checkpoint (every part of partSize on disk), no
// record and no manifest.
func Staged(dest string, f *File, partSize int64) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer root.Close()
	id := fileID(f)
	for _, dir := range []string{partialDir, doneDir, verifiedDir} {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := root.Rename(f.Path, stagedName(id, false, LoadedFile{})); err != nil {
		return err
	}
	done := make([]bool, (f.Size+partSize-1)/partSize)
	for i := range done {
		done[i] = true
	}
	if err := writeCheckpoint(root, &checkpoint{ID: id, Size: f.Size, PartSize: partSize, Done: setBits(done)}); err != nil {
		return err
	}
	_ = root.Remove(doneName(id))
	return root.Remove(path.Join(StateDir, ManifestFile))
}
