package pack

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
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
