package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"

	"github.com/modelgate/modelgate/loader"
)

// Open reads bytes [off, off+n) of f with one ranged GET. The GET carries
// If-Match with the listed ETag, and the answer's ETag is checked too (for
// stores that ignore If-Match): an object replaced since List fails with
// loader.ErrVerification.
func (s *Source) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	what := s.url(f.Key)
	if off < 0 || n <= 0 || off+n > f.Size {
		return nil, fmt.Errorf("%s: range %d-%d is outside the object's %d bytes: %w", what, off, off+n-1, f.Size, loader.ErrInvalid)
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+n-1); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, err, loader.ErrInvalid)
	}
	etag := etagOf(f)
	if etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			return nil, fmt.Errorf("%s: %w: %w", what, err, loader.ErrInvalid)
		}
	}
	rctx, ra := withRetryAfter(ctx)
	body, info, h, err := s.core.GetObject(rctx, s.bucket, f.Key, opts)
	if err != nil {
		return nil, s.classify(err, what, ra.get())
	}
	if etag != "" && info.ETag != etag {
		_ = body.Close()
		return nil, fmt.Errorf("%s: object changed during download (ETag %s, listed as %s): %w", what, info.ETag, etag, loader.ErrVerification)
	}
	if err := checkRange(h.Get("Content-Range"), off, n, f.Size); err != nil {
		_ = body.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return loader.ExactReader(body, n), nil
}

// checkRange checks the Content-Range of the answer to a request for
// [off, off+n): it must start at off and cover n bytes, or be absent when
// the whole object was asked for (a 200).
func checkRange(cr string, off, n, size int64) error {
	if cr == "" {
		if off == 0 && n == size {
			return nil
		}
		return fmt.Errorf("the store ignored the range request for bytes %d-%d: %w", off, off+n-1, loader.ErrVerification)
	}
	start, end, ok := loader.ParseContentRange(cr)
	if !ok || start != off || end < off+n-1 {
		return fmt.Errorf("the store answered the range %d-%d with Content-Range %q: %w", off, off+n-1, cr, loader.ErrVerification)
	}
	return nil
}
