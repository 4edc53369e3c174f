package hubtest

import (
	"crypto/sha1" //nolint:gosec // git's object ids
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/modelgate/modelgate/loader/loadertest"
)

// Repo is a model repository: commits of files, and the branches and
// tags that name them.
type Repo struct {
	// Commits are the commits by id (40 lower-case hex digits, see
	// CommitID), each a set of files with distinct paths.
	Commits map[string][]File
	// Refs are the branches and tags, each naming a commit of Commits.
	// "main" is the default branch.
	Refs map[string]string
	// Private hides the repository, as if it did not exist, from
	// requests without one of Tokens.
	Private bool
	// Gated shows the repository and its files to anyone, but lets only
	// Tokens download them.
	Gated bool
	// Tokens read a private repository, or have accepted a gated one's
	// terms. They are valid tokens of the server.
	Tokens []string
}

// File is one file of a commit.
type File struct {
	// Path is the file's path in the repository, slash separated.
	Path string
	// Content is the file's bytes, given or generated.
	Content loadertest.Content
	// LFS stores the file in LFS: the tree lists its SHA-256, and
	// downloads are redirected to the CDN.
	LFS bool
	// SHA256, when set, is the content's SHA-256 as lower-case hex,
	// trusted instead of hashing large generated content.
	SHA256 string
}

// CommitID is a commit id derived from name: 40 hex digits, the same for
// the same name.
func CommitID(name string) string {
	sum := sha1.Sum([]byte("commit " + name)) //nolint:gosec // an id, not a secret
	return hex.EncodeToString(sum[:])
}

// OneCommit is a public repository whose branch main is one commit of
// files; the commit's id derives from the files' paths, sizes and kinds.
func OneCommit(files ...File) Repo {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s %d %t\n", f.Path, f.Content.Size(), f.LFS)
	}
	id := CommitID(b.String())
	return Repo{Commits: map[string][]File{id: files}, Refs: map[string]string{"main": id}}
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// repo is a repository as the server keeps it.
type repo struct {
	id      string
	refs    map[string]string
	commits map[string]*commit
	private bool
	gated   bool
	tokens  map[string]bool
}

// commit is one commit's files, and its tree built on first use.
type commit struct {
	id    string
	files map[string]*blob
	once  sync.Once
	tree  []treeEntry // sorted by path, directories included
}

// blob is a file with its digests, computed on first use.
type blob struct {
	File
	once        sync.Once
	oid         string // git blob id of the content, or of the LFS pointer
	pointerSize int64
}

// treeEntry is an entry of the tree API.
type treeEntry struct {
	Type string   `json:"type"`
	OID  string   `json:"oid"`
	Size int64    `json:"size"`
	Path string   `json:"path"`
	LFS  *lfsInfo `json:"lfs,omitempty"`
}

type lfsInfo struct {
	OID         string `json:"oid"`
	Size        int64  `json:"size"`
	PointerSize int64  `json:"pointerSize"`
}

// AddRepo adds the repository id ("org/name"), or replaces it. It
// panics on a malformed repository: a mistake in the test.
func (s *Server) AddRepo(id string, r Repo) {
	if org, name, ok := strings.Cut(id, "/"); !ok || org == "" || name == "" || strings.Contains(name, "/") {
		panic(fmt.Sprintf("hubtest: repository id %q is not org/name", id))
	}
	rp := &repo{id: id, refs: map[string]string{}, commits: map[string]*commit{}, private: r.Private, gated: r.Gated, tokens: map[string]bool{}}
	for cid, files := range r.Commits {
		if !commitRE.MatchString(cid) {
			panic(fmt.Sprintf("hubtest: commit %q of %s is not 40 lower-case hex digits", cid, id))
		}
		c := &commit{id: cid, files: map[string]*blob{}}
		for _, f := range files {
			if _, dup := c.files[f.Path]; dup || f.Path == "" || path.Clean(f.Path) != f.Path || strings.HasPrefix(f.Path, "/") {
				panic(fmt.Sprintf("hubtest: file %q of %s@%s is repeated or not a clean relative path", f.Path, id, cid))
			}
			c.files[f.Path] = &blob{File: f}
		}
		rp.commits[cid] = c
	}
	for ref, cid := range r.Refs {
		if rp.commits[cid] == nil {
			panic(fmt.Sprintf("hubtest: ref %q of %s names commit %q, which it does not have", ref, id, cid))
		}
		rp.refs[ref] = cid
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range r.Tokens {
		rp.tokens[t] = true
		s.tokens[t] = true
	}
	s.repos[id] = rp
	delete(s.renamed, id)
}

// Rename moves the repository from to the id to; requests naming from are
// redirected (307, relative Location) to to, as the Hub does.
func (s *Server) Rename(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.repos[from]
	if rp == nil {
		panic(fmt.Sprintf("hubtest: no repository %q to rename", from))
	}
	delete(s.repos, from)
	moved := *rp // requests in flight may still read rp
	moved.id = to
	s.repos[to] = &moved
	s.renamed[from] = to
	for old, cur := range s.renamed {
		if cur == from {
			s.renamed[old] = to
		}
	}
}

// lookup finds a repository, or the id it was renamed to.
func (s *Server) lookup(id string) (rp *repo, renamedTo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rp := s.repos[id]; rp != nil {
		return rp, ""
	}
	return nil, s.renamed[id]
}

// resolve finds the commit a branch, tag or commit id names.
func (r *repo) resolve(rev string) *commit {
	if cid, ok := r.refs[rev]; ok {
		return r.commits[cid]
	}
	return r.commits[rev]
}

// digests computes the blob's ids once.
func (b *blob) digests() {
	b.once.Do(func() {
		size := b.Content.Size()
		if !b.LFS {
			b.oid = gitOID(b.Content, size)
			return
		}
		if b.SHA256 == "" {
			h := sha256.New()
			copyContent(h, b.Content)
			b.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		ptr := "version https://git-lfs.github.com/spec/v1\noid sha256:" + b.SHA256 + "\nsize " + strconv.FormatInt(size, 10) + "\n"
		b.pointerSize = int64(len(ptr))
		b.oid = gitOID(loadertest.Bytes([]byte(ptr)), b.pointerSize)
	})
}

// gitOID is git's blob id: SHA-1 of "blob <size>\x00" and the content.
func gitOID(c loadertest.Content, size int64) string {
	h := sha1.New() //nolint:gosec // git's object ids
	fmt.Fprintf(h, "blob %d\x00", size)
	copyContent(h, c)
	return hex.EncodeToString(h.Sum(nil))
}

func copyContent(h hash.Hash, c loadertest.Content) {
	r := newContentReader(c)
	defer r.release()
	if _, err := io.Copy(h, r); err != nil {
		panic(fmt.Sprintf("hubtest: reading content: %v", err))
	}
}

// entries is the commit's tree: every file and directory, sorted by
// path (the order cursors follow).
func (c *commit) entries() []treeEntry {
	c.once.Do(func() {
		dirs := map[string]bool{}
		for p, b := range c.files {
			b.digests()
			e := treeEntry{Type: "file", OID: b.oid, Size: b.Content.Size(), Path: p}
			if b.LFS {
				e.LFS = &lfsInfo{OID: b.SHA256, Size: b.Content.Size(), PointerSize: b.pointerSize}
			}
			c.tree = append(c.tree, e)
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				dirs[d] = true
			}
		}
		for d := range dirs {
			sum := sha1.Sum([]byte("tree " + c.id + " " + d)) //nolint:gosec // an id, not a secret
			c.tree = append(c.tree, treeEntry{Type: "directory", OID: hex.EncodeToString(sum[:]), Path: d})
		}
		sort.Slice(c.tree, func(i, j int) bool { return c.tree[i].Path < c.tree[j].Path })
	})
	return c.tree
}

// isDir reports whether the commit has a directory d.
func (c *commit) isDir(d string) bool {
	for _, e := range c.entries() {
		if e.Path == d {
			return e.Type == "directory"
		}
	}
	return false
}

// paths are the commit's file paths, sorted.
func (c *commit) paths() []string {
	out := make([]string, 0, len(c.files))
	for p := range c.files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
