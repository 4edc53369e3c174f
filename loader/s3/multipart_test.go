package s3

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

// multipart makes the store answer for key as S3 does for an object a
// multipart upload of parts of partSize wrote: its ETag is etag (the MD5 of
// the parts' MD5s, "-N"), extra headers are added (composite checksums),
// and a HEAD of ?partNumber=1 gives the first part's size and the part
// count. gofakes3 knows none of this; If-Match is checked here against
// the multipart ETag instead.
func multipart(key string, size, partSize int64, etag string, extra map[string]string) middleware {
	parts := (size + partSize - 1) / partSize
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/"+testBucket+"/"+key {
				next.ServeHTTP(w, r)
				return
			}
			if m := r.Header.Get("If-Match"); m != "" && m != etag && m != `"`+etag+`"` {
				w.WriteHeader(http.StatusPreconditionFailed)
				return
			}
			r.Header.Del("If-Match")
			if r.URL.Query().Get("partNumber") == "1" && r.Method == http.MethodHead {
				w.Header().Set("ETag", `"`+etag+`"`)
				w.Header().Set("Content-Length", strconv.FormatInt(partSize, 10))
				w.Header().Set("Last-Modified", "Sat, 28 Nov 2026 00:00:00 GMT")
				w.Header().Set("x-amz-mp-parts-count", strconv.FormatInt(parts, 10))
				w.WriteHeader(http.StatusPartialContent)
				return
			}
			ew := &etagWriter{ResponseWriter: w, etag: etag, extra: extra}
			next.ServeHTTP(ew, r)
			if !ew.wrote { // a HEAD answered without WriteHeader
				ew.WriteHeader(http.StatusOK)
			}
		})
	}
}

// etagWriter replaces the ETag of an answer and adds headers.
type etagWriter struct {
	http.ResponseWriter
	etag  string
	extra map[string]string
	wrote bool
}

func (e *etagWriter) WriteHeader(code int) {
	if e.wrote {
		return
	}
	e.wrote = true
	e.Header().Set("ETag", `"`+e.etag+`"`)
	for k, v := range e.extra {
		e.Header().Set(k, v)
	}
	e.ResponseWriter.WriteHeader(code)
}

func (e *etagWriter) Write(b []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusOK)
	}
	return e.ResponseWriter.Write(b)
}

// partsDigest is the digest of the parts' digests of data in parts of
// partSize, and the part count.
func partsDigest(newHash func() interface {
	Write([]byte) (int, error)
	Sum([]byte) []byte
}, data []byte, partSize int) ([]byte, int) {
	outer := newHash()
	n := 0
	for off := 0; off < len(data); off += partSize {
		h := newHash()
		h.Write(data[off:min(off+partSize, len(data))])
		outer.Write(h.Sum(nil))
		n++
	}
	return outer.Sum(nil), n
}

// An object a multipart upload wrote, with no checksum of the whole
// object: its multipart ETag, or its COMPOSITE SHA-256, is verified part by
// part in the upload's own parts; a wrong one fails the load.
func TestLoadMultipart(t *testing.T) {
	const partSize = 3000
	data := pseudoRandom(10_000)
	newMD5 := func() interface {
		Write([]byte) (int, error)
		Sum([]byte) []byte
	} {
		return md5.New()
	}
	newSHA := func() interface {
		Write([]byte) (int, error)
		Sum([]byte) []byte
	} {
		return sha256.New()
	}
	md5s, n := partsDigest(newMD5, data, partSize)
	shas, _ := partsDigest(newSHA, data, partSize)
	etag := fmt.Sprintf("%s-%d", hex.EncodeToString(md5s), n)
	for name, tc := range map[string]struct {
		etag  string
		extra map[string]string
		want  loader.Digest
		fail  bool
	}{
		"multipart ETag": {etag: etag, want: loader.Digest{Algorithm: "md5-parts", Hex: etag}},
		"composite SHA-256": {etag: etag, extra: map[string]string{"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(shas) + "-4", "x-amz-checksum-type": "COMPOSITE"},
			want: loader.Digest{Algorithm: "sha256-parts", Hex: hex.EncodeToString(shas) + "-4"}},
		"a wrong multipart ETag": {etag: "0123456789abcdef0123456789abcdef-4", fail: true},
	} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, multipart("mp/big.bin", int64(len(data)), partSize, tc.etag, tc.extra))
			st.put(t, "mp/big.bin", data, nil)
			dest := t.TempDir()
			res, err := loader.Load(context.Background(), st.source(t, "mp", nil),
				loader.Options{Dest: dest, URI: "s3://models/mp", PartSize: 64 << 10, Concurrency: 4})
			if tc.fail {
				if !errors.Is(err, loader.ErrVerification) {
					t.Fatalf("got %v, want %v", err, loader.ErrVerification)
				}
				return
			}
			if err != nil || res.Verified != 1 {
				t.Fatalf("Load: %+v, %v", res, err)
			}
			got, err := os.ReadFile(filepath.Join(dest, "big.bin"))
			if err != nil || !cmp.Equal(got, data) {
				t.Fatalf("big.bin: %d bytes, %v", len(got), err)
			}
			b, _ := os.ReadFile(filepath.Join(dest, loader.StateDir, loader.ManifestFile))
			var m loader.Manifest
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]loader.Digest{tc.want}, m.Files[0].Digests); diff != "" {
				t.Errorf("manifest digests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMultipartETag(t *testing.T) {
	const d = "0123456789abcdef0123456789abcdef"
	for name, tc := range map[string]struct {
		etag    string
		headers map[string]string
		ok      bool
	}{
		"multipart":   {etag: `"` + d + `-12"`, ok: true},
		"single part": {etag: d},
		"no count":    {etag: d + "-"},
		"zero parts":  {etag: d + "-0"},
		"not hex":     {etag: "z123456789abcdef0123456789abcdef-3"},
		"SSE-KMS":     {etag: d + "-3", headers: map[string]string{"x-amz-server-side-encryption": "aws:kms"}},
		"SSE-C":       {etag: d + "-3", headers: map[string]string{"x-amz-server-side-encryption-customer-algorithm": "AES256"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			got, n, ok := multipartETag(h, tc.etag)
			if ok != tc.ok || ok && (got != d || n != 12) {
				t.Errorf("multipartETag(%q) = %q, %d, %v; want ok %v", tc.etag, got, n, ok, tc.ok)
			}
		})
	}
}
