package s3

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

// isObjectGet, isHead and isList tell the requests of a load apart.
func isObjectGet(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Get("list-type") == ""
}
func isHead(r *http.Request) bool { return r.Method == http.MethodHead }
func isList(r *http.Request) bool { return r.URL.Query().Get("list-type") == "2" }

// slowDown answers the first three requests that match with 503 SlowDown
// and Retry-After: 7.
func slowDown(match func(*http.Request) bool) middleware {
	var left atomic.Int32
	left.Store(3)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if match(r) && left.Add(-1) >= 0 {
				w.Header().Set("Retry-After", "7")
				s3Error(w, http.StatusServiceUnavailable, "SlowDown")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func TestSlowDownIsTransient(t *testing.T) {
	tests := map[string]func(*http.Request) bool{
		"listing": isList,
		"HEAD":    isHead,
		"GET":     isObjectGet,
	}
	for name, match := range tests {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, slowDown(match))
			st.put(t, "m/w.bin", []byte("weights"), nil)
			s := st.source(t, "m", nil)
			load := func(ctx context.Context) error {
				l, err := s.List(ctx)
				if err != nil {
					return err
				}
				_, err = readRange(s, &l.Files[0], 0, 7)
				return err
			}
			err := load(context.Background())
			after, ok := loader.IsTransient(err)
			if !ok || after != 7*time.Second {
				t.Fatalf("got %v (retry after %v), want a Transient failure with Retry-After 7s", err, after)
			}
			// A HEAD's answer has no body: only its status tells.
			if msg := err.Error(); !strings.Contains(msg, "s3://models/m") || (!strings.Contains(msg, "SlowDown") && !strings.Contains(msg, "503")) {
				t.Errorf("error %q does not name the object and the failure", err)
			}
			quick := loader.RetryPolicy{Attempts: 4, Base: time.Millisecond, Max: time.Millisecond, MaxRetryAfter: time.Millisecond}
			if err := quick.Do(context.Background(), load); err != nil {
				t.Errorf("after the burst: %v", err)
			}
		})
	}
}

func TestStoreRefusals(t *testing.T) {
	tests := map[string]struct {
		status    int
		code      string
		want      error // nil: no loader failure kind
		transient bool
	}{
		"archived object":      {status: http.StatusForbidden, code: "InvalidObjectState"},
		"access denied":        {status: http.StatusForbidden, code: "AccessDenied", want: loader.ErrAccessDenied},
		"unknown key":          {status: http.StatusForbidden, code: "InvalidAccessKeyId", want: loader.ErrAccessDenied},
		"wrong secret":         {status: http.StatusForbidden, code: "SignatureDoesNotMatch", want: loader.ErrAccessDenied},
		"no such bucket":       {status: http.StatusNotFound, code: "NoSuchBucket", want: loader.ErrNotFound},
		"internal error":       {status: http.StatusInternalServerError, code: "InternalError", transient: true},
		"request timeout":      {status: http.StatusBadRequest, code: "RequestTimeout", transient: true},
		"too many requests":    {status: http.StatusTooManyRequests, code: "TooManyRequests", transient: true},
		"bad gateway, no body": {status: http.StatusBadGateway, transient: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, func(http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					if tc.code == "" {
						w.WriteHeader(tc.status)
						return
					}
					s3Error(w, tc.status, tc.code)
				})
			})
			_, err := st.source(t, "m", nil).List(context.Background())
			if _, ok := loader.IsTransient(err); ok != tc.transient {
				t.Errorf("transient %v, want %v: %v", ok, tc.transient, err)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if got := loader.Kind(err); !errors.Is(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("got %v, want an error wrapping %v", err, tc.want)
			}
			msg := err.Error()
			if strings.Contains(msg, testSecret) || strings.Contains(msg, "refused by the test") {
				t.Errorf("error %q quotes a secret or the store's message", msg)
			}
			if errors.Is(tc.want, loader.ErrAccessDenied) && (!strings.Contains(msg, "static keys from AWS_ACCESS_KEY_ID") || !strings.Contains(msg, tc.code)) {
				t.Errorf("error %q does not say which credentials were refused, and why", msg)
			}
		})
	}
}

func TestCutConnectionIsTransient(t *testing.T) {
	st := newStore(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !isObjectGet(r) {
				next.ServeHTTP(w, r)
				return
			}
			// Promise the range, send half, hang up.
			w.Header().Set("Content-Range", "bytes 0-9/10")
			w.Header().Set("Content-Length", "10")
			w.Header().Set("ETag", r.Header.Get("If-Match"))
			w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write([]byte("01234"))
		})
	})
	st.put(t, "m/w.bin", []byte("0123456789"), nil)
	s := st.source(t, "m", nil)
	l, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = readRange(s, &l.Files[0], 0, 10)
	if _, ok := loader.IsTransient(err); !ok {
		t.Errorf("a cut connection gave %v, want a Transient failure", err)
	}

	st.srv.Close()
	_, err = s.List(context.Background())
	if _, ok := loader.IsTransient(err); !ok {
		t.Errorf("a refused connection gave %v, want a Transient failure", err)
	}
}

func TestDigestsFromHeaders(t *testing.T) {
	const (
		md5Hex = "9e107d9d372bb6826bd81d3542a419d6"
		shaB64 = "16j7swfXgJRpypq8sAguT41WUeRtPNt2LQLQvzfJ5ZI="
		shaHex = "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"
	)
	sha := loader.Digest{Algorithm: loader.SHA256, Hex: shaHex}
	md := loader.Digest{Algorithm: loader.MD5, Hex: md5Hex}
	tests := map[string]struct {
		headers map[string]string
		etag    string
		want    []loader.Digest
	}{
		"single part":                {etag: md5Hex, want: []loader.Digest{md}},
		"upper-case ETag":            {etag: strings.ToUpper(md5Hex), want: []loader.Digest{md}},
		"multipart ETag":             {etag: md5Hex[:30] + "-3"},
		"not hex":                    {etag: strings.Repeat("z", 32)},
		"SSE-S3 keeps MD5 ETags":     {headers: map[string]string{"x-amz-server-side-encryption": "AES256"}, etag: md5Hex, want: []loader.Digest{md}},
		"SSE-KMS":                    {headers: map[string]string{"x-amz-server-side-encryption": "aws:kms"}, etag: md5Hex},
		"DSSE-KMS":                   {headers: map[string]string{"x-amz-server-side-encryption": "aws:kms:dsse"}, etag: md5Hex},
		"SSE-C":                      {headers: map[string]string{"x-amz-server-side-encryption-customer-algorithm": "AES256"}, etag: md5Hex},
		"full-object SHA-256":        {headers: map[string]string{"x-amz-checksum-sha256": shaB64}, want: []loader.Digest{sha}},
		"composite SHA-256":          {headers: map[string]string{"x-amz-checksum-sha256": shaB64 + "-4"}},
		"composite type":             {headers: map[string]string{"x-amz-checksum-sha256": shaB64, "x-amz-checksum-type": "COMPOSITE"}},
		"full-object CRC32C":         {headers: map[string]string{"x-amz-checksum-crc32c": "4waSgw=="}, want: []loader.Digest{{Algorithm: loader.CRC32C, Hex: "e3069283"}}},
		"checksum of the wrong size": {headers: map[string]string{"x-amz-checksum-sha256": "4waSgw=="}},
		"full-object CRC64NVME":      {headers: map[string]string{"x-amz-checksum-crc64nvme": "AAECAwQFBgc="}, want: []loader.Digest{{Algorithm: loader.CRC64NVME, Hex: "0001020304050607"}}},
		"full-object CRC32 and SHA-1": {headers: map[string]string{"x-amz-checksum-crc32": "AAECAw==", "x-amz-checksum-sha1": "AAECAwQFBgcICQoLDA0ODxAREhM="},
			want: []loader.Digest{{Algorithm: loader.CRC32, Hex: "00010203"}, {Algorithm: loader.SHA1, Hex: "000102030405060708090a0b0c0d0e0f10111213"}}},
		"every full-object checksum, and the ETag": {headers: map[string]string{"x-amz-checksum-crc64nvme": "AAECAwQFBgc=", "x-amz-checksum-sha256": shaB64, "x-amz-checksum-type": "FULL_OBJECT"}, etag: md5Hex,
			want: []loader.Digest{{Algorithm: loader.CRC64NVME, Hex: "0001020304050607"}, sha, md}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			if diff := cmp.Diff(tc.want, digests(h, tc.etag)); diff != "" {
				t.Errorf("digests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckRange(t *testing.T) {
	tests := map[string]struct {
		contentRange string
		off, n, size int64
		ok           bool
	}{
		"exact":               {contentRange: "bytes 10-19/100", off: 10, n: 10, size: 100, ok: true},
		"last byte":           {contentRange: "bytes 99-99/100", off: 99, n: 1, size: 100, ok: true},
		"whole object, a 200": {off: 0, n: 100, size: 100, ok: true},
		"range ignored":       {off: 10, n: 10, size: 100},
		"wrong start":         {contentRange: "bytes 0-19/100", off: 10, n: 10, size: 100},
		"short":               {contentRange: "bytes 10-18/100", off: 10, n: 10, size: 100},
		"malformed":           {contentRange: "bytes ten-19/100", off: 10, n: 10, size: 100},
		"other unit":          {contentRange: "items 10-19/100", off: 10, n: 10, size: 100},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := checkRange(tc.contentRange, tc.off, tc.n, tc.size)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, loader.ErrVerification)) {
				t.Errorf("checkRange(%q, %d, %d, %d) = %v, want ok %v", tc.contentRange, tc.off, tc.n, tc.size, err, tc.ok)
			}
		})
	}
}
