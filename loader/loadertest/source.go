package loadertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/modelgate/modelgate/loader"
)

// Source reads the server's files the way the HTTP schemes do: a listing
// request, then ranged GETs checked with loader.RangeBody.
type Source struct {
	base   string
	client *http.Client
	// HF, when set, is returned in the listing (the hub cache layout).
	HF *loader.HFRepo
	// NoDigests leaves the digests out of the listing.
	NoDigests bool
	// Digest is the digest listed: SHA256 when empty, or CRC64NVME (the
	// checksum S3 computes for every upload).
	Digest loader.Algorithm
}

var _ loader.Source = (*Source)(nil)

// Source returns a loader.Source for the server's files through client
// (nil: a client from loader.NewHTTPClient with 16 connections).
func (s *Server) Source(client *http.Client) *Source {
	if client == nil {
		client, _ = loader.NewHTTPClient(loader.HTTPOptions{Conns: 16})
	}
	return &Source{base: s.URL(), client: client}
}

// List implements loader.Source.
func (s *Source) List(ctx context.Context) (*loader.Listing, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/index", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, loader.Retryable(err, 0)
	}
	if err := loader.CheckStatus(resp, "index"); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var idx []Entry
	if err := json.NewDecoder(resp.Body).Decode(&idx); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	l := &loader.Listing{Revision: "test", HF: s.HF}
	for _, e := range idx {
		f := loader.File{Path: e.Path, Size: e.Size, Key: e.Path, Version: e.SHA256}
		switch {
		case s.NoDigests:
		case s.Digest == loader.CRC64NVME:
			f.Digests = []loader.Digest{{Algorithm: loader.CRC64NVME, Hex: e.CRC64NVME}}
		default:
			f.Digests = []loader.Digest{{Algorithm: loader.SHA256, Hex: e.SHA256}}
		}
		l.Files = append(l.Files, f)
	}
	return l, nil
}

// Open implements loader.Source.
func (s *Source) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/files/"+(&url.URL{Path: f.Key}).EscapedPath(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := s.client.Do(req) //nolint:bodyclose // CheckStatus and RangeBody close it on failure; otherwise the returned reader owns it
	if err != nil {
		return nil, loader.Retryable(err, 0)
	}
	if err := loader.CheckStatus(resp, f.Path); err != nil {
		return nil, err
	}
	return loader.RangeBody(resp, off, n, f.Size)
}

// Remote is a Source for a Server running in another process, at url.
func Remote(url string) *Source {
	client, _ := loader.NewHTTPClient(loader.HTTPOptions{Conns: 16})
	return &Source{base: url, client: client}
}
