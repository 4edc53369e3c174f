package pack

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// node is a file, directory or link in a test tree.
type node struct {
	// data is a file's content; size, when set instead, is the size of
	// generated content (seeded by seed).
	data []byte
	size int64
	seed uint64
	mode os.FileMode // default 0644, 0755 for a directory
	dir  bool
	link string
}

// writeTree writes nodes, keyed by slash path, under dir, parents first.
func writeTree(t testing.TB, dir string, nodes map[string]node) {
	t.Helper()
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		nd, p := nodes[n], filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case nd.dir:
			err = os.MkdirAll(p, 0o755)
			if err == nil && nd.mode != 0 {
				err = os.Chmod(p, nd.mode)
			}
		case nd.link != "":
			err = os.Symlink(nd.link, p)
		default:
			err = writeFile(p, nd)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(p string, nd node) error {
	mode := nd.mode
	if mode == 0 {
		mode = 0o644
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if nd.data != nil {
		_, err = f.Write(nd.data)
	} else {
		_, err = io.Copy(f, io.LimitReader(generated(nd.seed), nd.size))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(p, mode) // whatever the umask
	}
	return err
}

// generated is an endless stream of pseudo-random bytes from seed.
func generated(seed uint64) io.Reader {
	return rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 1})
}

// tree describes what a directory holds, keyed by slash path: a
// directory, a file by its SHA-256 and whether it is executable, a link
// by its target. Paths under skip are left out.
func tree(t testing.TB, dir string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s {
				return filepath.SkipDir
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case rel == ".":
		case m.IsDir():
			out[rel] = "dir"
		case m&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link -> " + target
		case m.IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("file %s exec=%t", hex.EncodeToString(h.Sum(nil))[:16], m.Perm()&0o111 != 0)
		default:
			out[rel] = "special " + m.String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// build builds dir's index with o, failing the test on error.
func build(t testing.TB, dir string, o Options) v1.ImageIndex {
	t.Helper()
	idx, err := Build(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// firstImage is the index's first manifest's image.
func firstImage(t testing.TB, idx v1.ImageIndex) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// layersOf are an image's layers, failing the test on error.
func layersOf(t testing.TB, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// digests are the layers' digests.
func digests(t testing.TB, ls []v1.Layer) []string {
	t.Helper()
	var out []string
	for _, l := range ls {
		h, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h.String())
	}
	return out
}

// headers are the tar headers of a layer, read from its stream.
func headers(t testing.TB, l v1.Layer) []*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []*tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
}

// extract extracts a layer's tar stream into dir as a container runtime
// would, but strictly: an entry whose parent directory is not in dir
// already is an error, so a layer must carry its own parents when
// extracted alone.
func extract(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(h.Name, "/")
		if !filepath.IsLocal(name) {
			return fmt.Errorf("entry %q leads out of the layer", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if fi, err := os.Lstat(filepath.Dir(p)); err != nil || !fi.IsDir() {
			return fmt.Errorf("entry %q: its parent directory is not there (%v)", h.Name, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, os.FileMode(h.Mode)); err != nil && !os.IsExist(err) {
				return err
			}
		case tar.TypeReg:
			_ = os.Remove(p)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode))
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			_ = os.Remove(p)
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q has type %q", h.Name, h.Typeflag)
		}
	}
}

// extractLayer extracts l into dir.
func extractLayer(t testing.TB, l v1.Layer, dir string) error {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	return extract(rc, dir)
}
