package hf

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/modelgate/modelgate/loader"
)

// resolveURL is where the Hub serves a file of a commit:
// /{repo}/resolve/{commit}/{path}, each segment escaped.
func (s *Source) resolveURL(commit, p string) string {
	return s.base + "/" + s.repo + "/resolve/" + commit + "/" + escapePath(p)
}

// Open implements loader.Source: a ranged GET of the file's resolve URL
// at the listed commit, following the Hub's redirects (the token goes to
// the endpoint only).
func (s *Source) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	s.mu.Lock()
	commit := s.commit
	s.mu.Unlock()
	what := s.uri() + ": " + f.Path
	if commit == "" {
		return nil, fmt.Errorf("%s: opened before the repository was listed", what)
	}
	h := http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+n-1)}}
	resp, err := s.get(ctx, s.client, http.MethodGet, s.resolveURL(commit, f.Key), what, h) //nolint:bodyclose // check and RangeBody close it on failure; otherwise the returned reader owns it
	if err != nil {
		return nil, err
	}
	if err := s.check(resp, what, f.Path); err != nil {
		return nil, err
	}
	rc, err := loader.RangeBody(resp, off, n, f.Size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rc, nil
}

// probeAccess asks for f's metadata (HEAD, as get_hf_file_metadata does),
// following only redirects on the endpoint's origin (a renamed
// repository): a gated repository answers GatedRepo there when the token
// has no access, and a redirect to the CDN when it has.
func (s *Source) probeAccess(ctx context.Context, commit string, f *loader.File) error {
	what := s.uri() + ": " + f.Path
	resp, err := s.get(ctx, s.probe, http.MethodHead, s.resolveURL(commit, f.Key), what, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		drain(resp)
		return nil
	}
	if err := s.check(resp, what, f.Path); err != nil {
		return err
	}
	drain(resp)
	return nil
}
