// Package ctxio has I/O helpers that honour a context.
package ctxio

import (
	"context"
	"io"
)

// Reader returns a reader of r that stops reading, with the context's
// error, once ctx is done: a long copy (io.Copy) is cut at the next read.
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx, r} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
