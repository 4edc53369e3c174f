package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

func TestListPrefix(t *testing.T) {
	st := newStore(t, nil)
	for key, size := range map[string]int{
		"a/b":                      3,
		"a/b/c.bin":                5,
		"a/b/d/e.json":             7,
		"a/b/dir/":                 0, // directory marker
		"a/bc/x":                   11,
		"a/b.txt":                  13,
		"single/model.safetensors": 17,
	} {
		st.put(t, key, bytes.Repeat([]byte("x"), size), nil)
	}
	tests := map[string]struct {
		prefix string
		want   []listed
	}{
		"exact path prefix, with the object itself": {
			prefix: "a/b",
			want: []listed{
				{Path: "b", Key: "a/b", Size: 3},
				{Path: "c.bin", Key: "a/b/c.bin", Size: 5},
				{Path: "d/e.json", Key: "a/b/d/e.json", Size: 7},
			},
		},
		"trailing slash: only below": {
			prefix: "a/b/",
			want: []listed{
				{Path: "c.bin", Key: "a/b/c.bin", Size: 5},
				{Path: "d/e.json", Key: "a/b/d/e.json", Size: 7},
			},
		},
		"sibling with a longer name": {
			prefix: "a/bc",
			want:   []listed{{Path: "x", Key: "a/bc/x", Size: 11}},
		},
		"single object": {
			prefix: "single/model.safetensors",
			want:   []listed{{Path: "model.safetensors", Key: "single/model.safetensors", Size: 17}},
		},
		"whole bucket": {
			prefix: "",
			want: []listed{
				{Path: "a/b", Key: "a/b", Size: 3},
				{Path: "a/b.txt", Key: "a/b.txt", Size: 13},
				{Path: "a/b/c.bin", Key: "a/b/c.bin", Size: 5},
				{Path: "a/b/d/e.json", Key: "a/b/d/e.json", Size: 7},
				{Path: "a/bc/x", Key: "a/bc/x", Size: 11},
				{Path: "single/model.safetensors", Key: "single/model.safetensors", Size: 17},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			l, err := st.source(t, tc.prefix, nil).List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff(tc.want, summarize(l)); diff != "" {
				t.Errorf("listing (-want +got):\n%s", diff)
			}
			for _, f := range l.Files {
				if f.Version == "" {
					t.Errorf("%s: no Version", f.Path)
				}
			}
		})
	}
}

func TestListFailures(t *testing.T) {
	st := newStore(t, nil)
	st.put(t, "m/w.bin", []byte("w"), nil)
	st.put(t, "dup", []byte("1"), nil)
	st.put(t, "dup/dup", []byte("2"), nil)
	tests := map[string]struct {
		bucket, prefix string
		want           error
		mention        []string
	}{
		"empty prefix":    {bucket: testBucket, prefix: "nothing/here", want: loader.ErrNotFound, mention: []string{`"models"`, `"nothing/here"`}},
		"near miss":       {bucket: testBucket, prefix: "m/w", want: loader.ErrNotFound, mention: []string{`"m/w"`}},
		"missing bucket":  {bucket: "absent", prefix: "m", want: loader.ErrNotFound, mention: []string{`bucket "absent"`}},
		"paths collide":   {bucket: testBucket, prefix: "dup", want: loader.ErrInvalid, mention: []string{`"dup/dup"`}},
		"bad bucket name": {bucket: "b", prefix: "m", want: loader.ErrInvalid, mention: []string{`bucket "b"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := New(context.Background(), Config{Bucket: tc.bucket, Prefix: tc.prefix, Getenv: st.env(nil)})
			if err == nil {
				_, err = s.List(context.Background())
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tc.want)
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %s", err, m)
				}
			}
		})
	}
}

func TestDigests(t *testing.T) {
	st := newStore(t, nil)
	data := []byte("the weights of a small model")
	sha := sha256.Sum256(data)
	crc := binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	md := md5.Sum(data)
	st.put(t, "plain", data, nil)
	st.put(t, "checksummed", data, map[string]string{
		"x-amz-checksum-sha256": base64.StdEncoding.EncodeToString(sha[:]),
		"x-amz-checksum-crc32c": base64.StdEncoding.EncodeToString(crc),
		"x-amz-checksum-type":   "FULL_OBJECT",
	})
	st.put(t, "kms", data, map[string]string{"x-amz-server-side-encryption": "aws:kms"})
	l, err := st.source(t, "", nil).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]loader.Digest{}
	for _, f := range l.Files {
		got[f.Path] = f.Digests
	}
	want := map[string][]loader.Digest{
		"plain": {{Algorithm: loader.MD5, Hex: hex.EncodeToString(md[:])}},
		"checksummed": {
			{Algorithm: loader.CRC32C, Hex: hex.EncodeToString(crc)},
			{Algorithm: loader.SHA256, Hex: hex.EncodeToString(sha[:])},
			{Algorithm: loader.MD5, Hex: hex.EncodeToString(md[:])},
		},
		"kms": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("digests (-want +got):\n%s", diff)
	}
	// The checksum-mode header asks the store for the checksums.
	for _, r := range st.requests() {
		if r.Method == http.MethodHead && r.Header.Get("x-amz-checksum-mode") != "ENABLED" {
			t.Errorf("HEAD %s without x-amz-checksum-mode: ENABLED", r.URL.Path)
		}
	}
}

func TestOpenRanges(t *testing.T) {
	for name, tlsOn := range map[string]bool{"http": false, "https with a CA bundle": true} {
		t.Run(name, func(t *testing.T) {
			st, ca := startStore(t, nil, tlsOn), ""
			if tlsOn {
				ca = st.caFile(t)
			}
			data := pseudoRandom(1000)
			st.put(t, "m/weights.bin", data, nil)
			s, err := New(context.Background(), Config{Bucket: testBucket, Prefix: "m", Getenv: st.env(nil), CABundle: ca})
			if err != nil {
				t.Fatal(err)
			}
			l, err := s.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			f := file(t, l, "weights.bin")
			for _, r := range []struct{ off, n int64 }{{0, 1}, {0, 1000}, {1, 998}, {500, 100}, {999, 1}} {
				got, err := readRange(s, f, r.off, r.n)
				if err != nil {
					t.Fatalf("Open(%d, %d): %v", r.off, r.n, err)
				}
				if !bytes.Equal(got, data[r.off:r.off+r.n]) {
					t.Errorf("Open(%d, %d): got %d bytes, not the object's bytes %d-%d", r.off, r.n, len(got), r.off, r.off+r.n-1)
				}
			}
			gets := 0
			for _, r := range st.requests() {
				if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/weights.bin") {
					gets++
					if r.Header.Get("Range") == "" || r.Header.Get("If-Match") != `"`+etagOf(f)+`"` {
						t.Errorf("GET with Range %q and If-Match %q, want both", r.Header.Get("Range"), r.Header.Get("If-Match"))
					}
				}
			}
			if gets != 5 {
				t.Errorf("%d GETs for 5 reads, want one each", gets)
			}
		})
	}
}

func TestUntrustedCertificate(t *testing.T) {
	st := newTLSStore(t, nil)
	st.put(t, "m/w", []byte("w"), nil)
	_, err := st.source(t, "m", nil).List(context.Background())
	if err == nil {
		t.Fatal("List trusted a certificate outside the system roots and CA bundle")
	}
	if _, ok := loader.IsTransient(err); ok || !strings.Contains(err.Error(), "CA bundle") {
		t.Errorf("got %v, want a failure that is not retried and points at the CA bundle", err)
	}
}

func TestOpenObjectChanged(t *testing.T) {
	// enforceIfMatch answers GETs as S3 does: 412 when If-Match is not
	// the object's ETag (gofakes3 ignores If-Match on GET).
	var seenIfMatch atomic.Value // string
	enforceIfMatch := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if im := r.Header.Get("If-Match"); r.Method == http.MethodGet && im != "" {
				seenIfMatch.Store(im)
				head := httptest.NewRecorder()
				next.ServeHTTP(head, httptest.NewRequest(http.MethodHead, r.URL.String(), nil))
				if head.Header().Get("ETag") != im {
					s3Error(w, http.StatusPreconditionFailed, "PreconditionFailed")
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	for name, wrap := range map[string]middleware{
		"store enforces If-Match": enforceIfMatch,
		"store ignores If-Match":  nil,
	} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, wrap)
			st.put(t, "m/w.bin", []byte("first version"), nil)
			s := st.source(t, "m", nil)
			l, err := s.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			f := file(t, l, "w.bin")
			if _, err := readRange(s, f, 0, 5); err != nil {
				t.Fatalf("read before the change: %v", err)
			}
			st.put(t, "m/w.bin", []byte("second version"), nil)
			_, err = readRange(s, f, 0, 5)
			if !errors.Is(err, loader.ErrVerification) || !strings.Contains(err.Error(), "object changed during download") {
				t.Fatalf("got %v, want %v: object changed during download", err, loader.ErrVerification)
			}
			if im, _ := seenIfMatch.Load().(string); wrap != nil && im != `"`+etagOf(f)+`"` {
				t.Errorf("If-Match %q, want the listed ETag %q", im, etagOf(f))
			}
		})
	}
}
