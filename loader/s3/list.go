package s3

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/minio/minio-go/v7"
	"golang.org/x/sync/errgroup"

	"github.com/modelgate/modelgate/loader"
)

// List lists the objects under the prefix, then HEADs each (Conns at a
// time) for its ETag, version and checksums. Zero-size keys ending in '/'
// are directory markers and skipped.
func (s *Source) List(ctx context.Context) (*loader.Listing, error) {
	type entry struct{ key, rel string }
	var entries []entry
	seen := map[string]string{} // path -> key
	lctx, ra := withRetryAfter(ctx)
	for obj := range s.core.ListObjectsIter(lctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if obj.Err != nil {
			return nil, s.classify(obj.Err, s.url(""), ra.get())
		}
		if obj.Size == 0 && strings.HasSuffix(obj.Key, "/") {
			continue
		}
		rel, ok := loader.RelativeKey(s.prefix, obj.Key)
		if !ok {
			continue // a sibling: "a/bc" under the listing prefix "a/b"
		}
		if other, dup := seen[rel]; dup {
			return nil, fmt.Errorf("%s: objects %q and %q would both be written to %q: %w", s.url(""), other, obj.Key, rel, loader.ErrInvalid)
		}
		seen[rel] = obj.Key
		entries = append(entries, entry{key: obj.Key, rel: rel})
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no objects in bucket %q under prefix %q: %w", s.url(""), s.bucket, s.prefix, loader.ErrNotFound)
	}

	files := make([]loader.File, len(entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conns)
	for i, e := range entries {
		g.Go(func() error {
			f, err := s.stat(gctx, e.key)
			if err != nil {
				return err
			}
			f.Path = e.rel
			files[i] = f
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return &loader.Listing{Files: files}, nil
}

// stat HEADs one object, asking for its checksums.
func (s *Source) stat(ctx context.Context, key string) (loader.File, error) {
	ctx, ra := withRetryAfter(ctx)
	info, err := s.core.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		return loader.File{}, s.classify(err, s.url(key), ra.get())
	}
	if info.Size < 0 {
		return loader.File{}, fmt.Errorf("%s: the store gave no size", s.url(key))
	}
	version := info.ETag
	if info.VersionID != "" && info.VersionID != "null" {
		version += "@" + info.VersionID
	}
	return loader.File{
		Key:     key,
		Size:    info.Size,
		Version: version,
		Digests: digests(info.Headers, info.ETag),
	}, nil
}

// etagOf is the ETag part of a File's Version.
func etagOf(f *loader.File) string {
	etag, _, _ := strings.Cut(f.Version, "@")
	return etag
}

// digests are what a HEAD's answer vouches for about the whole object:
// its full-object checksums (CRC64NVME, which S3 computes for every new
// upload, CRC32C, CRC32, SHA-1 and SHA-256; composite ones, of the parts,
// are skipped), and the ETag as MD5 when it is one: a single-part upload
// not encrypted with SSE-KMS or SSE-C. The loader verifies the cheapest.
func digests(h http.Header, etag string) []loader.Digest {
	var ds []loader.Digest
	composite := strings.EqualFold(h.Get("x-amz-checksum-type"), "COMPOSITE")
	for _, c := range []struct {
		header string
		size   int
		alg    loader.Algorithm
	}{
		{"x-amz-checksum-crc64nvme", 8, loader.CRC64NVME},
		{"x-amz-checksum-crc32c", 4, loader.CRC32C},
		{"x-amz-checksum-crc32", 4, loader.CRC32},
		{"x-amz-checksum-sha1", 20, loader.SHA1},
		{"x-amz-checksum-sha256", 32, loader.SHA256},
	} {
		if d, ok := checksum(h.Get(c.header), c.size); ok && !composite {
			ds = append(ds, loader.Digest{Algorithm: c.alg, Hex: d})
		}
	}
	if d, ok := etagMD5(h, etag); ok {
		ds = append(ds, loader.Digest{Algorithm: loader.MD5, Hex: d})
	}
	return ds
}

// checksum decodes a base64 checksum of size bytes to hex; a composite
// one ("...-N") is not of the whole content.
func checksum(v string, size int) (string, bool) {
	v = strings.TrimSpace(v)
	if v == "" || strings.Contains(v, "-") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != size {
		return "", false
	}
	return hex.EncodeToString(b), true
}

// etagMD5 returns the ETag as an MD5 digest when it is one.
func etagMD5(h http.Header, etag string) (string, bool) {
	etag = strings.ToLower(strings.Trim(strings.TrimSpace(etag), `"`))
	if len(etag) != 32 {
		return "", false
	}
	if _, err := hex.DecodeString(etag); err != nil {
		return "", false
	}
	if sse := strings.ToLower(h.Get("x-amz-server-side-encryption")); strings.HasPrefix(sse, "aws:kms") {
		return "", false
	}
	if h.Get("x-amz-server-side-encryption-customer-algorithm") != "" {
		return "", false
	}
	return etag, true
}
