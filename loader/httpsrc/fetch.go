package httpsrc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelgate/modelgate/loader"
)

// meta is what a HEAD, or the probing GET, says about the file.
type meta struct {
	size   int64 // -1 when unknown
	ranges bool  // the server serves byte ranges
	header http.Header
}

// List asks the server about the file with a HEAD request. When HEAD is
// refused (405, 501, or 403 from a URL presigned for GET only) or gives
// no length, a GET of the first byte asks instead.
func (s *Source) List(ctx context.Context) (*loader.Listing, error) {
	what := "listing " + s.shown
	m, err := s.head(ctx, what)
	if err != nil {
		return nil, err
	}
	if m == nil || m.size < 0 {
		if m, err = s.probe(ctx, what); err != nil {
			return nil, err
		}
	}
	if m.size < 0 {
		return nil, fmt.Errorf("%s: the server does not say the file's size (no Content-Length)", what)
	}
	server, err := serverDigests(m.header)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sum, err := agreeingSHA256(s.sha256, server)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	f := loader.File{Path: s.name, Size: m.size, Version: validator(m.header), Key: s.shown, Sequential: !m.ranges}
	l := &loader.Listing{Revision: strings.Trim(strongETag(m.header), `"`)}
	if sum != "" {
		f.Digests = []loader.Digest{{Algorithm: loader.SHA256, Hex: sum}}
		l.Revision = "sha256:" + sum
	}
	l.Files = []loader.File{f}
	return l, nil
}

// head sends the HEAD request; nil, nil when the server refuses it.
func (s *Source) head(ctx context.Context, what string) (*meta, error) {
	resp, err := s.do(ctx, http.MethodHead, nil, what)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusForbidden:
		_ = resp.Body.Close()
		return nil, nil
	}
	if err := loader.CheckStatus(resp, what); err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	return &meta{size: contentLength(resp.Header), ranges: acceptsRanges(resp.Header), header: resp.Header}, nil
}

// probe GETs the first byte: a 206 tells the size and that ranges work, a
// 200 the size of a file read only whole, a 416 an empty file.
func (s *Source) probe(ctx context.Context, what string) (*meta, error) {
	resp, err := s.do(ctx, http.MethodGet, http.Header{"Range": {"bytes=0-0"}}, what)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		total, ok := contentRangeTotal(resp.Header.Get("Content-Range"))
		if !ok {
			return nil, fmt.Errorf("%s: the server answered the first byte with Content-Range %.80q and no size: %w",
				what, resp.Header.Get("Content-Range"), loader.ErrVerification)
		}
		return &meta{size: total, ranges: true, header: resp.Header}, nil
	case http.StatusRequestedRangeNotSatisfiable:
		if total, ok := contentRangeTotal(resp.Header.Get("Content-Range")); ok && total == 0 {
			return &meta{size: 0, ranges: true, header: resp.Header}, nil
		}
		return nil, fmt.Errorf("%s: the server refused the first byte (HTTP %s) of a file that is not empty", what, resp.Status)
	}
	if err := loader.CheckStatus(resp, what); err != nil {
		return nil, err
	}
	// A 200: the whole file is coming; closing the body stops it.
	return &meta{size: contentLength(resp.Header), header: resp.Header}, nil
}

// Open reads [off, off+n) of the file. A range carries If-Range with the
// version List saw, so that a file replaced since answers with the whole
// new file, which fails with ErrVerification rather than mixing versions.
// A Sequential file is read in one GET from the start.
func (s *Source) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	what := "reading " + s.shown
	if off < 0 || n <= 0 || off+n > f.Size {
		return nil, fmt.Errorf("%s: range %d+%d is outside its %d bytes: %w", what, off, n, f.Size, loader.ErrInvalid)
	}
	if f.Sequential && off != 0 {
		return nil, fmt.Errorf("%s: the server does not serve ranges, so the file is read from the start, not at %d: %w", what, off, loader.ErrInvalid)
	}
	whole := off == 0 && n == f.Size
	h := http.Header{}
	if !f.Sequential {
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
		if f.Version != "" {
			h.Set("If-Range", f.Version)
		}
	}
	resp, err := s.do(ctx, http.MethodGet, h, what)
	if err != nil {
		return nil, err
	}
	changed := func(how string) error {
		_ = resp.Body.Close()
		return fmt.Errorf("%s: file changed during download (%s): %w", what, how, loader.ErrVerification)
	}
	if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
		return nil, changed(fmt.Sprintf("bytes %d-%d are past its end now", off, off+n-1))
	}
	if err := loader.CheckStatus(resp, what); err != nil {
		return nil, err
	}
	if now, ok := differs(f.Version, resp.Header); ok {
		return nil, changed(fmt.Sprintf("version %s, listed as %s", now, f.Version))
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if !f.Sequential && !whole {
			return nil, changed("the server answered a range with the whole file")
		}
		if size := contentLength(resp.Header); size >= 0 && size != f.Size {
			return nil, changed(fmt.Sprintf("%d bytes, listed as %d", size, f.Size))
		}
	case http.StatusPartialContent:
		if total, ok := contentRangeTotal(resp.Header.Get("Content-Range")); ok && total != f.Size {
			return nil, changed(fmt.Sprintf("%d bytes, listed as %d", total, f.Size))
		}
	}
	rc, err := loader.RangeBody(resp, off, n, f.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rc, nil
}

// validator is what identifies the file's content for If-Range: its
// strong ETag, else its Last-Modified date; "" when it has neither.
func validator(h http.Header) string {
	if e := strongETag(h); e != "" {
		return e
	}
	return h.Get("Last-Modified")
}

// differs says whether a response shows another version of the file
// than the listed one, comparing the same kind of validator: a server may
// send an ETag on GET but not on HEAD.
func differs(listed string, h http.Header) (now string, changed bool) {
	if listed == "" {
		return "", false
	}
	if isETag(listed) {
		now = strongETag(h)
		return now, now != "" && now != listed
	}
	now = h.Get("Last-Modified")
	if now == "" {
		return "", false
	}
	a, errA := http.ParseTime(listed)
	b, errB := http.ParseTime(now)
	if errA == nil && errB == nil {
		return now, !a.Equal(b)
	}
	return now, now != listed
}

func isETag(v string) bool { return strings.HasPrefix(v, `"`) }

// strongETag is the response's ETag when it is a well-formed strong one
// (weak ETags cannot be used with If-Range).
func strongETag(h http.Header) string {
	e := strings.TrimSpace(h.Get("ETag"))
	if len(e) < 2 || e[0] != '"' || e[len(e)-1] != '"' || strings.ContainsAny(e[1:len(e)-1], "\"\x00\r\n") {
		return ""
	}
	return e
}

// acceptsRanges says whether Accept-Ranges lists "bytes".
func acceptsRanges(h http.Header) bool {
	for _, v := range h.Values("Accept-Ranges") {
		for unit := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(unit), "bytes") {
				return true
			}
		}
	}
	return false
}

// contentLength reads Content-Length; -1 when absent or malformed.
func contentLength(h http.Header) int64 {
	v := h.Get("Content-Length")
	if v == "" {
		return -1
	}
	n, ok := digits(strings.TrimSpace(v))
	if !ok {
		return -1
	}
	return n
}

// contentRangeTotal reads the complete length of "bytes a-b/total" or
// "bytes */total"; ok is false when it is absent ("*") or malformed.
func contentRangeTotal(v string) (int64, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !ok {
		return 0, false
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	n, ok := digits(total)
	if !ok {
		return 0, false
	}
	if rng == "*" {
		return n, true
	}
	a, b, ok := strings.Cut(rng, "-")
	start, ok1 := digits(a)
	end, ok2 := digits(b)
	return n, ok && ok1 && ok2 && start <= end && end < n
}

// digits reads a non-negative decimal number without sign or spaces.
func digits(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
