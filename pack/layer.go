package pack

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layer is an uncompressed tar layer of files on disk. Its digest and
// size come from one streaming pass at build time; its content is the
// same stream made again, from disk, each time it is read.
type layer struct {
	dir    string
	plan   plan
	digest v1.Hash
	size   int64
}

var _ v1.Layer = (*layer)(nil)

// newLayer hashes the layer of p, reading its files from dir once.
func newLayer(ctx context.Context, dir string, p plan) (*layer, error) {
	h := sha256.New()
	n := &counter{}
	if err := writeTar(ctx, io.MultiWriter(h, n), dir, p.entries); err != nil {
		return nil, err
	}
	return &layer{dir: dir, plan: p, size: n.n,
		digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}}, nil
}

// String names the layer by what it holds.
func (l *layer) String() string { return l.plan.what }

// Digest implements v1.Layer.
func (l *layer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID implements v1.Layer: the layer is uncompressed, so it is its
// digest.
func (l *layer) DiffID() (v1.Hash, error) { return l.digest, nil }

// Size implements v1.Layer.
func (l *layer) Size() (int64, error) { return l.size, nil }

// MediaType implements v1.Layer.
func (l *layer) MediaType() (types.MediaType, error) { return types.OCIUncompressedLayer, nil }

// Compressed implements v1.Layer: the tar stream, as the layer is not
// compressed.
func (l *layer) Compressed() (io.ReadCloser, error) { return l.Uncompressed() }

// Uncompressed implements v1.Layer: the tar stream, written from disk
// while it is read. Closing it early stops the writing.
func (l *layer) Uncompressed() (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, copyBuffer)
		err := writeTar(context.Background(), bw, l.dir, l.plan.entries)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			err = fmt.Errorf("layer %s: %w", l.plan.what, err)
		}
		pw.CloseWithError(err) // nil: the reader sees io.EOF
	}()
	return pr, nil
}

// counter counts the bytes written to it.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
