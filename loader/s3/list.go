package s3

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
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
	f := loader.File{
		Key:     key,
		Size:    info.Size,
		Version: version,
		Digests: digests(info.Headers, info.ETag),
	}
	if len(f.Digests) == 0 {
		// Nothing of the whole object: a multipart upload's digests of
		// its parts' digests, checked part by part.
		c, err := s.composite(ctx, key, info)
		if err != nil {
			return loader.File{}, err
		}
		f.Composite = c
	}
	return f, nil
}

// composite is what a multipart object's HEAD vouches for about its
// parts: the cheapest COMPOSITE checksum (CRC32C, CRC32, SHA-1, SHA-256 of
// the parts' checksums), else the multipart ETag (MD5 of the parts' MD5s,
// not for SSE-KMS or SSE-C objects), with the part size a HEAD of part 1
// gives. nil when there is none, or the parts are not all of that size
// but the last (then only the size is checked).
func (s *Source) composite(ctx context.Context, key string, info minio.ObjectInfo) (*loader.Composite, error) {
	h := info.Headers
	var c *loader.Composite
	for _, k := range checksumHeaders {
		if d, n, ok := compositeValue(h.Get(k.header), k.size); ok {
			c = &loader.Composite{Algorithm: k.alg, Hex: d, Parts: n}
			break
		}
	}
	if c == nil {
		d, n, ok := multipartETag(h, info.ETag)
		if !ok {
			return nil, nil
		}
		c = &loader.Composite{Algorithm: loader.MD5, Hex: d, Parts: n}
	}
	ctx, ra := withRetryAfter(ctx)
	opts := minio.StatObjectOptions{}
	opts.PartNumber = 1
	if err := opts.SetMatchETag(info.ETag); err != nil {
		return nil, nil //nolint:nilerr // an ETag minio cannot send: size only
	}
	part, err := s.core.StatObject(ctx, s.bucket, key, opts)
	if err != nil {
		return nil, s.classify(err, s.url(key), ra.get())
	}
	c.PartSize = part.Size
	if pc, err := strconv.Atoi(part.Headers.Get("x-amz-mp-parts-count")); err == nil && c.Parts == 0 {
		c.Parts = pc
	}
	if !c.Valid(info.Size) {
		return nil, nil
	}
	return c, nil
}

// compositeValue decodes a COMPOSITE checksum, "<base64>-<parts>", to hex
// and the part count.
func compositeValue(v string, size int) (string, int, bool) {
	b64, parts, ok := strings.Cut(strings.TrimSpace(v), "-")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.Atoi(parts)
	if err != nil || n < 1 {
		return "", 0, false
	}
	d, ok := checksum(b64, size)
	return d, n, ok
}

// multipartETag decodes a multipart upload's ETag, "<32 hex>-<parts>":
// the MD5 of its parts' MD5s, unless the object is encrypted with SSE-KMS
// or SSE-C (whose ETags are not MD5s).
func multipartETag(h http.Header, etag string) (string, int, bool) {
	etag = strings.ToLower(strings.Trim(strings.TrimSpace(etag), `"`))
	d, parts, ok := strings.Cut(etag, "-")
	if !ok || len(d) != 32 {
		return "", 0, false
	}
	if _, err := hex.DecodeString(d); err != nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(parts)
	if err != nil || n < 1 {
		return "", 0, false
	}
	if !etagIsMD5s(h) {
		return "", 0, false
	}
	return d, n, true
}

// etagOf is the ETag part of a File's Version.
func etagOf(f *loader.File) string {
	etag, _, _ := strings.Cut(f.Version, "@")
	return etag
}

// checksumHeaders are S3's checksums: the header, the digest's size in
// bytes, and the algorithm. CRC64NVME is only ever of the whole object.
var checksumHeaders = []struct {
	header string
	size   int
	alg    loader.Algorithm
}{
	{"x-amz-checksum-crc64nvme", 8, loader.CRC64NVME},
	{"x-amz-checksum-crc32c", 4, loader.CRC32C},
	{"x-amz-checksum-crc32", 4, loader.CRC32},
	{"x-amz-checksum-sha1", 20, loader.SHA1},
	{"x-amz-checksum-sha256", 32, loader.SHA256},
}

// etagIsMD5s reports whether the object's ETag is made of MD5s: not for
// SSE-KMS or SSE-C objects.
func etagIsMD5s(h http.Header) bool {
	sse := strings.ToLower(h.Get("x-amz-server-side-encryption"))
	return !strings.HasPrefix(sse, "aws:kms") && h.Get("x-amz-server-side-encryption-customer-algorithm") == ""
}

// digests are what a HEAD's answer vouches for about the whole object:
// its full-object checksums (CRC64NVME, which S3 computes for every new
// upload, CRC32C, CRC32, SHA-1 and SHA-256; composite ones, of the parts,
// are skipped), and the ETag as MD5 when it is one: a single-part upload
// not encrypted with SSE-KMS or SSE-C. The loader verifies the cheapest.
func digests(h http.Header, etag string) []loader.Digest {
	var ds []loader.Digest
	composite := strings.EqualFold(h.Get("x-amz-checksum-type"), "COMPOSITE")
	for _, c := range checksumHeaders {
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
	if !etagIsMD5s(h) {
		return "", false
	}
	return etag, true
}
