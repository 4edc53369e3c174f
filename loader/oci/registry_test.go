package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/modelgate/modelgate/loader"
)

// testRegistry is go-containerregistry's in-memory registry behind a
// front door that tests configure: credentials to require, ranges to
// ignore, blobs to redirect to another origin, failures to inject.
type testRegistry struct {
	reg     http.Handler
	front   *httptest.Server
	storage *httptest.Server // blob storage the front redirects to
	host    string           // the front's host:port

	// Set before requests are made.
	user, pass   string // basic credentials required when set
	bearer       string // a bearer token required when set (token endpoint at /token)
	noRanges     bool   // blob GETs lose their Range header
	redirect     bool   // blob GETs are redirected to storage
	failStatus   int    // every /v2/ request answers this when set
	wrongDigest  bool   // manifests carry a wrong Docker-Content-Digest
	storageGets  atomic.Int32
	storageAuths atomic.Int32
	rangedGets   atomic.Int32
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	r := &testRegistry{reg: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	r.storage = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.storageGets.Add(1)
		if req.Header.Get("Authorization") != "" {
			r.storageAuths.Add(1)
		}
		r.reg.ServeHTTP(w, req)
	}))
	r.front = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.front.Close)
	t.Cleanup(r.storage.Close)
	r.host = strings.TrimPrefix(r.front.URL, "http://")
	return r
}

func (r *testRegistry) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path == "/token" {
		r.serveToken(w, req)
		return
	}
	if r.failStatus != 0 {
		w.Header().Set("Retry-After", "7")
		http.Error(w, "injected", r.failStatus)
		return
	}
	if !r.authorized(req) {
		if r.bearer != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+r.front.URL+`/token",service="test"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		}
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
		return
	}
	blobGet := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/")
	if blobGet && req.Header.Get("Range") != "" {
		r.rangedGets.Add(1)
	}
	if blobGet && r.noRanges {
		req.Header.Del("Range")
	}
	if blobGet && r.redirect {
		http.Redirect(w, req, r.storage.URL+req.URL.Path, http.StatusTemporaryRedirect)
		return
	}
	if r.wrongDigest && strings.Contains(req.URL.Path, "/manifests/") {
		w = overrideHeader{w, "Docker-Content-Digest", digest.FromString("other").String()}
	}
	r.reg.ServeHTTP(w, req)
}

func (r *testRegistry) authorized(req *http.Request) bool {
	switch {
	case r.bearer != "":
		return req.Header.Get("Authorization") == "Bearer "+r.bearer
	case r.user != "":
		u, p, ok := req.BasicAuth()
		return ok && u == r.user && p == r.pass
	}
	return true
}

// serveToken is a distribution-spec token endpoint: basic credentials in,
// the bearer token out.
func (r *testRegistry) serveToken(w http.ResponseWriter, req *http.Request) {
	if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"token": r.bearer})
}

type overrideHeader struct {
	http.ResponseWriter
	key, value string
}

func (o overrideHeader) WriteHeader(code int) {
	o.Header().Set(o.key, o.value)
	o.ResponseWriter.WriteHeader(code)
}

// source is a Source for host/repository:reference with env as its
// environment.
func (r *testRegistry) source(t *testing.T, repository, tag, dgst string, env map[string]string) *Source {
	t.Helper()
	s, err := New(Config{
		Registry: r.host, Repository: repository, Tag: tag, Digest: dgst,
		Getenv: func(k string) string { return env[k] }, PlainHTTP: true,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// pusher writes straight to the registry, past the front door.
type pusher struct {
	t    *testing.T
	repo *remote.Repository
}

func (r *testRegistry) pusher(t *testing.T, repository string) *pusher {
	t.Helper()
	admin := httptest.NewServer(r.reg)
	t.Cleanup(admin.Close)
	repo, err := remote.NewRepository(strings.TrimPrefix(admin.URL, "http://") + "/" + repository)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	return &pusher{t: t, repo: repo}
}

// blob pushes data and returns its descriptor with annotations.
func (p *pusher) blob(mediaType string, data []byte, ann map[string]string) ocispec.Descriptor {
	p.t.Helper()
	d := content.NewDescriptorFromBytes(mediaType, data)
	if err := p.repo.Push(context.Background(), d, bytes.NewReader(data)); err != nil {
		p.t.Fatalf("push blob: %v", err)
	}
	d.Annotations = ann
	return d
}

// artifact packs an OCI 1.1 manifest of layers, tags it and returns its
// digest. config may be nil (the empty config).
func (p *pusher) artifact(artifactType string, config *ocispec.Descriptor, layers []ocispec.Descriptor, tag string) digest.Digest {
	p.t.Helper()
	ctx := context.Background()
	d, err := oras.PackManifest(ctx, p.repo, oras.PackManifestVersion1_1, artifactType,
		oras.PackManifestOptions{Layers: layers, ConfigDescriptor: config})
	if err != nil {
		p.t.Fatalf("pack manifest: %v", err)
	}
	if err := p.repo.Tag(ctx, d, tag); err != nil {
		p.t.Fatalf("tag: %v", err)
	}
	return d.Digest
}

// manifest pushes raw manifest bytes under ref (a tag or "" for by
// digest) and returns its digest.
func (p *pusher) manifest(mediaType string, raw []byte, ref string) digest.Digest {
	p.t.Helper()
	d := content.NewDescriptorFromBytes(mediaType, raw)
	if ref == "" {
		ref = d.Digest.String()
	}
	if err := p.repo.PushReference(context.Background(), d, bytes.NewReader(raw), ref); err != nil {
		p.t.Fatalf("push manifest: %v", err)
	}
	return d.Digest
}

// image pushes a go-containerregistry image's blobs and manifest.
func (p *pusher) image(img v1.Image, tag string) digest.Digest {
	p.t.Helper()
	layers, err := img.Layers()
	if err != nil {
		p.t.Fatal(err)
	}
	for _, l := range layers {
		mt, _ := l.MediaType()
		rc, err := l.Compressed()
		if err != nil {
			p.t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil {
			p.t.Fatal(err)
		}
		p.blob(string(mt), b, nil)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		p.t.Fatal(err)
	}
	p.blob("application/octet-stream", cfg, nil)
	raw, err := img.RawManifest()
	if err != nil {
		p.t.Fatal(err)
	}
	mt, _ := img.MediaType()
	return p.manifest(string(mt), raw, tag)
}

// tarOf is a tar of name → content, in the order given.
func tarOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i+1 < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fileOf is the File List gives a layer.
func fileOf(d ocispec.Descriptor, path string, unpack loader.Archive) loader.File {
	return loader.File{
		Path: path, Size: d.Size, Unpack: unpack,
		Digests: []loader.Digest{{Algorithm: loader.SHA256, Hex: d.Digest.Encoded()}},
		Version: d.Digest.String(), Key: d.Digest.String(),
	}
}

// readAll opens [off, off+n) of f and reads it.
func readAll(t *testing.T, s *Source, f *loader.File, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Open(context.Background(), f, off, n)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(rc)
}
