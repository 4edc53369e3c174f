package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/archive"
	"github.com/modelgate/modelgate/loader/gcs"
	"github.com/modelgate/modelgate/loader/hf"
	"github.com/modelgate/modelgate/loader/httpsrc"
	"github.com/modelgate/modelgate/loader/oci"
	"github.com/modelgate/modelgate/loader/s3"
)

// lazySource builds the scheme's Source on first use: a cache hit never
// builds it, so it makes no request (not even an S3 or GCS credential
// probe) and needs no credentials.
type lazySource struct {
	once sync.Once
	mk   func() (loader.Source, error)
	src  loader.Source
	err  error
}

func (l *lazySource) get() (loader.Source, error) {
	l.once.Do(func() { l.src, l.err = l.mk() })
	return l.src, l.err
}

// List implements loader.Source.
func (l *lazySource) List(ctx context.Context) (*loader.Listing, error) {
	src, err := l.get()
	if err != nil {
		return nil, err
	}
	return src.List(ctx)
}

// Open implements loader.Source.
func (l *lazySource) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	src, err := l.get()
	if err != nil {
		return nil, err
	}
	return src.Open(ctx, f, off, n)
}

// newSource builds the Source of a parsed model URI. Every scheme reads
// its credentials from the environment, where the webhook puts the keys
// of the Secret named by modelgate.io/model-credentials, and the keys
// modelgate.io/model-credentials-keys maps to the loader's variables.
func newSource(ctx context.Context, u annotations.ModelURI, f *loadFlags) (loader.Source, error) {
	client, err := loader.NewHTTPClient(loader.HTTPOptions{CABundle: f.caBundle, Conns: f.concurrency, UserAgent: "modelgate-loader/" + version})
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case annotations.SchemeS3:
		ca := f.caBundle
		if ca == "" {
			ca = os.Getenv("AWS_CA_BUNDLE")
		}
		return s3.New(ctx, s3.Config{Bucket: u.Host, Prefix: u.Path, CABundle: ca, Conns: f.concurrency})
	case annotations.SchemeGS:
		return gcs.New(ctx, gcs.Config{Bucket: u.Host, Prefix: u.Path, HTTP: client})
	case annotations.SchemeHF:
		return hf.New(hf.Config{Repo: u.Path, Revision: u.Revision, HTTP: client})
	case annotations.SchemeHTTPS:
		raw, _, _ := strings.Cut(u.Raw, "#")
		return httpsrc.New(httpsrc.Config{URL: raw, SHA256: u.SHA256, HTTP: client})
	case annotations.SchemeOCI:
		return oci.New(oci.Config{Registry: u.Host, Repository: u.Path, Tag: u.Tag, Digest: u.Digest, HTTP: client})
	default: // pvc:// is refused by runLoad before any source is built
		return nil, fmt.Errorf("scheme %q cannot be loaded: %w", u.Scheme, loader.ErrInvalid)
	}
}

// extract is loader.Extractor over archive.Extract: temporary files in the
// staging root's own state directory, which no archive entry can name.
func extract(ctx context.Context, r io.Reader, format loader.Archive, root *os.Root, dir string) ([]loader.LoadedFile, error) {
	entries, err := archive.Extract(ctx, r, format, root, dir, archive.Options{TempDir: loader.StateDir})
	if err != nil {
		return nil, err
	}
	var out []loader.LoadedFile
	for _, e := range entries {
		switch e.Type {
		case archive.TypeFile:
			out = append(out, loader.LoadedFile{Path: e.Path, Size: e.Size, Digests: []loader.Digest{{Algorithm: loader.SHA256, Hex: e.SHA256}}})
		case archive.TypeSymlink:
			out = append(out, loader.LoadedFile{Path: e.Path, Link: e.Link})
		}
	}
	_ = root.RemoveAll(loader.StateDir)
	return out, nil
}
