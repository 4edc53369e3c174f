package loader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"time"
)

// ManifestVersion is the format of the manifest this loader writes.
const ManifestVersion = 1

// maxManifestBytes bounds the manifest a loader reads back.
const maxManifestBytes = 64 << 20

// Layouts of the destination.
const (
	LayoutPlain   = "plain"
	LayoutHFCache = "hf-cache"
)

// Manifest records a complete, verified load. Load writes it last, at
// StateDir/ManifestFile: its presence is the one signal that the model in
// the destination is whole.
type Manifest struct {
	Version int `json:"version"`
	// URI is the model as the user named it; a load of another URI does
	// not trust this manifest.
	URI string `json:"uri"`
	// Revision is what the URI resolved to (a commit, a digest).
	Revision string `json:"revision,omitempty"`
	// Layout is LayoutPlain or LayoutHFCache.
	Layout string  `json:"layout"`
	HF     *HFRepo `json:"hf,omitempty"`
	// Files are the model's files with their verified digests.
	Files []LoadedFile `json:"files"`
	// Bytes is the files' total size.
	Bytes int64 `json:"bytes"`
	// Loader is the version of the loader that wrote the manifest.
	Loader string `json:"loader,omitempty"`
	// Completed is when the load completed.
	Completed time.Time `json:"completed"`
}

// LoadedFile is one file of a loaded model.
type LoadedFile struct {
	// Path is the file's path relative to the destination (in the hf
	// cache layout: the plain view's path, a symbolic link to Blob).
	Path string `json:"path"`
	Size int64  `json:"size"`
	// Digests are the digest verified: the cheapest the source vouched
	// for (none when it vouched for nothing Load knows; for an archive's
	// files, their SHA-256 as extracted).
	Digests []Digest `json:"digests,omitempty"`
	// Verified says the content matched at least one digest the source
	// vouched for (for an archive's files: the archive's).
	Verified bool `json:"verified"`
	// Blob is where the content is, relative to the destination, when it
	// is not Path (the hf cache's blobs/<etag>).
	Blob string `json:"blob,omitempty"`
	// Link is the target of a symbolic link an archive held.
	Link string `json:"link,omitempty"`
}

// content is where the file's bytes are.
func (f LoadedFile) content() string {
	if f.Blob != "" {
		return f.Blob
	}
	return f.Path
}

// readManifest reads the destination's manifest; nil, nil when there is
// none.
func readManifest(root *os.Root) (*Manifest, error) {
	name := path.Join(StateDir, ManifestFile)
	fi, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxManifestBytes {
		return nil, fmt.Errorf("manifest %s is larger than %d bytes", name, maxManifestBytes)
	}
	b, err := root.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("manifest %s has version %d, this loader writes %d", name, m.Version, ManifestVersion)
	}
	return &m, nil
}

// intact checks, without reading contents, that every file the manifest
// lists is in place with its size: the check of a cache hit.
func (m *Manifest) intact(root *os.Root) error {
	for _, f := range m.Files {
		if f.Link != "" {
			if _, err := root.Lstat(f.Path); err != nil {
				return err
			}
			continue
		}
		fi, err := root.Stat(f.Path) // follows the plain view's link
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Size() != f.Size {
			return fmt.Errorf("%s: %d bytes, the manifest says %d", f.Path, fi.Size(), f.Size)
		}
	}
	return nil
}

// writeManifest writes m durably: to a temporary file, synced, renamed
// into place, and the directory synced.
func writeManifest(root *os.Root, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(root, path.Join(StateDir, ManifestFile), append(b, '\n'))
}

// removeManifest removes the manifest before anything in the destination
// changes: from then on the destination is incomplete until a new one is
// written.
func removeManifest(root *os.Root) error {
	err := root.Remove(path.Join(StateDir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(root, StateDir)
}

// writeFileAtomic writes name through a temporary sibling, fsync and
// rename.
func writeFileAtomic(root *os.Root, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		return err
	}
	return syncDir(root, path.Dir(name))
}

// syncDir fsyncs a directory, so that renames in it survive a crash.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	// Some filesystems refuse fsync on a directory; the rename stands.
	_ = d.Sync()
	return nil
}
