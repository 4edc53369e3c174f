package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
)

// moveInto renames a verified file from the staging area to its final
// name, creating the parents, and syncs the directory.
func moveInto(root *os.Root, from, to string) error {
	dir := path.Dir(to)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return noSpace(err)
	}
	if fi, err := root.Lstat(to); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: a directory of that name is in the way: %w", to, ErrInvalid)
	}
	if err := root.Rename(from, to); err != nil {
		return err
	}
	return syncDir(root, dir)
}

var (
	hfCommitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
	hfIDRE     = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*/[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	hexRE      = regexp.MustCompile(`^[0-9a-f]{40,64}$`)
)

// hfCache places an hf:// model as the Hugging Face hub cache lays it out
// (models--org--name/{blobs/<etag>, snapshots/<commit>/<path>, refs/<ref>})
// under HFCacheDir, with a plain view of links at the destination's top.
type hfCache struct {
	repo HFRepo
	dir  string // HFCacheDir/models--org--name
}

func newHFCache(r *HFRepo) (*hfCache, error) {
	if !hfIDRE.MatchString(r.ID) || strings.Contains(r.ID, "..") {
		return nil, fmt.Errorf("hf repository %q is not org/name: %w", r.ID, ErrInvalid)
	}
	if !hfCommitRE.MatchString(r.Commit) {
		return nil, fmt.Errorf("hf commit %q is not 40 hex digits: %w", r.Commit, ErrInvalid)
	}
	if r.Ref != "" {
		if _, err := CleanPath(r.Ref); err != nil {
			return nil, fmt.Errorf("hf revision %q: %w", r.Ref, err)
		}
	}
	return &hfCache{repo: *r, dir: path.Join(HFCacheDir, hfDirName(r.ID))}, nil
}

// hfDirName is a model repository's directory in the hub cache.
func hfDirName(id string) string { return "models--" + strings.ReplaceAll(id, "/", "--") }

// blob is where a file's content goes: blobs/<etag>, the etag being the
// LFS sha256 or the git blob sha1, as the Hub's ETag headers give them.
func (c *hfCache) blob(f *File) (string, error) {
	etag := digestOf(f, SHA256)
	if etag == "" {
		etag = digestOf(f, GitSHA1)
	}
	if !hexRE.MatchString(etag) {
		return "", fmt.Errorf("%s: the hub listed no sha256 or git sha1 to name its blob: %w", f.Path, ErrInvalid)
	}
	return path.Join(c.dir, "blobs", etag), nil
}

func (c *hfCache) snapshot(p string) string {
	return path.Join(c.dir, "snapshots", c.repo.Commit, p)
}

// link lays out the snapshot links, the refs and the plain view once
// every blob is in place. It is idempotent.
func (c *hfCache) link(root *os.Root, files []LoadedFile) error {
	for _, f := range files {
		snap := c.snapshot(f.Path)
		if err := symlink(root, relLink(path.Dir(snap), f.Blob), snap); err != nil {
			return err
		}
		if err := symlink(root, relLink(path.Dir(f.Path), snap), f.Path); err != nil {
			return err
		}
	}
	// Engines started without a revision read refs/main: it names the
	// commit loaded, whatever revision the URI pinned (the cache holds
	// this one model version).
	refs := []string{"main"}
	if c.repo.Ref != "" && c.repo.Ref != "main" && c.repo.Ref != c.repo.Commit {
		refs = append(refs, c.repo.Ref)
	}
	for _, r := range refs {
		name := path.Join(c.dir, "refs", r)
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return noSpace(err)
		}
		if err := writeFileAtomic(root, name, []byte(c.repo.Commit)); err != nil {
			return noSpace(err)
		}
	}
	return nil
}

// relLink is the relative link target from a link in dir to target (both
// relative to the destination).
func relLink(dir, target string) string {
	if dir == "." || dir == "" {
		return target
	}
	return strings.Repeat("../", strings.Count(dir, "/")+1) + target
}

// symlink makes name a link to target, replacing a different link or
// file there.
func symlink(root *os.Root, target, name string) error {
	if cur, err := root.Readlink(name); err == nil && cur == target {
		return nil
	}
	if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
		return noSpace(err)
	}
	if fi, err := root.Lstat(name); err == nil {
		if fi.IsDir() {
			return fmt.Errorf("%s: a directory of that name is in the way: %w", name, ErrInvalid)
		}
		if err := root.Remove(name); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return noSpace(root.Symlink(target, name))
}
