package httpsrc

import (
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/loader"
)

// FuzzParseDigestFragment checks that a fragment either fails with
// ErrInvalid or yields 64 lower-case hex digits it spelled out.
func FuzzParseDigestFragment(f *testing.F) {
	for _, s := range []string{
		"sha256=2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
		"#sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"sha256=E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
		"md5=5eb63bbbe01eeed093cb22bb8f5acdc3",
		"sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855&subdirectory=x",
		"egg=model", "", "#", "sha256=", "=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fragment string) {
		got, err := ParseDigestFragment(fragment)
		if err != nil {
			if !errors.Is(err, loader.ErrInvalid) {
				t.Fatalf("ParseDigestFragment(%q) error %q does not wrap ErrInvalid", fragment, err)
			}
			return
		}
		if got == "" {
			if strings.TrimPrefix(fragment, "#") != "" {
				t.Fatalf("ParseDigestFragment(%q) = \"\" without an error", fragment)
			}
			return
		}
		if b, err := hex.DecodeString(got); err != nil || len(b) != 32 || strings.ToLower(got) != got {
			t.Fatalf("ParseDigestFragment(%q) = %q, not 64 lower-case hex digits", fragment, got)
		}
		if strings.TrimPrefix(fragment, "#") != "sha256="+got {
			t.Fatalf("ParseDigestFragment(%q) = %q, which the fragment does not spell", fragment, got)
		}
	})
}

// FuzzParseDigestHeader feeds Repr-Digest and Digest values, as a server
// could send them.
func FuzzParseDigestHeader(f *testing.F) {
	for _, s := range []string{
		"sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
		"sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:, sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:;x=1",
		"SHA-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=",
		"MD5=HUXZLQLMuI/KZ5KDcJPcOA==,SHA-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE",
		"sha-256=:", "sha-256=::", "sha-256", ",,,", "",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, structured bool) {
		sums, err := parseDigestHeader(v, structured)
		if err != nil {
			if !errors.Is(err, loader.ErrVerification) {
				t.Fatalf("parseDigestHeader(%q) error %q does not wrap ErrVerification", v, err)
			}
			return
		}
		for _, s := range sums {
			if b, err := hex.DecodeString(s); err != nil || len(b) != 32 {
				t.Fatalf("parseDigestHeader(%q) gave %q, not a SHA-256", v, s)
			}
		}
	})
}

// FuzzContentRangeTotal checks that a total, when read, is the number
// after the "/" and lies past the range's end.
func FuzzContentRangeTotal(f *testing.F) {
	for _, s := range []string{"bytes 0-0/1234", "bytes */0", "bytes 0-0/*", "bytes 5-4/10", "bytes 0-10/10", "bytes +1-2/3", "bytes -1/5", "items 0-1/2", "bytes 0-99/9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		total, ok := contentRangeTotal(v)
		if !ok {
			return
		}
		rng, after, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(v), "bytes "), "/")
		if n, err := strconv.ParseInt(after, 10, 64); err != nil || n != total || n < 0 {
			t.Fatalf("contentRangeTotal(%q) = %d, but the header's total is %q", v, total, after)
		}
		if rng == "*" {
			return
		}
		a, b, _ := strings.Cut(rng, "-")
		start, err1 := strconv.ParseInt(a, 10, 64)
		end, err2 := strconv.ParseInt(b, 10, 64)
		if err1 != nil || err2 != nil || start < 0 || start > end || end >= total {
			t.Fatalf("contentRangeTotal(%q) accepted range %q of %d bytes", v, rng, total)
		}
	})
}
