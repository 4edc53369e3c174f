package httpsrc

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelgate/modelgate/loader"
)

// ParseDigestFragment reads the fragment of a URI such as
// https://host/path/model.safetensors#sha256=<64 hex digits>, the form pip
// uses, and returns the hex digest. The fragment may be given with or
// without its leading "#"; an empty one returns "" and no error. Only
// sha256=<64 lower-case hex digits> is accepted, alone.
func ParseDigestFragment(fragment string) (sha256hex string, err error) {
	f := strings.TrimPrefix(fragment, "#")
	if f == "" {
		return "", nil
	}
	bad := func(rule string) error {
		return fmt.Errorf("digest fragment %q %s: %w", "#"+f, rule, loader.ErrInvalid)
	}
	if strings.ContainsAny(f, "&;,") {
		return "", bad("must hold one parameter, sha256=<64 hex digits>")
	}
	alg, v, ok := strings.Cut(f, "=")
	if !ok {
		return "", bad("must be sha256=<64 hex digits>")
	}
	if alg != "sha256" {
		return "", bad(fmt.Sprintf("names %q: only sha256=<64 hex digits> is accepted", alg))
	}
	if rule := sha256Rule(v); rule != "" {
		return "", bad(rule)
	}
	return v, nil
}

// sha256Rule returns the rule a hex SHA-256 breaks, or "" when it is one.
func sha256Rule(v string) string {
	if len(v) != 64 {
		return fmt.Sprintf("must have 64 hex digits, not %d", len(v))
	}
	for _, c := range []byte(v) {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
		case c >= 'A' && c <= 'F':
			return "must be written in lower-case hex"
		default:
			return "must be hex digits only"
		}
	}
	return ""
}

// headerDigest is a SHA-256 the server vouched for in a response header.
type headerDigest struct {
	header string // the header's name, for messages
	hex    string
}

// serverDigests returns the SHA-256s of the representation that the
// server sends in Repr-Digest (RFC 9530) and Digest (RFC 3230). Other
// algorithms are ignored; a sha-256 that is not base64 of 32 bytes is an
// error: the server vouches for something unreadable.
func serverDigests(h http.Header) ([]headerDigest, error) {
	var out []headerDigest
	for _, name := range []string{"Repr-Digest", "Digest"} {
		v := strings.Join(h.Values(name), ",")
		if v == "" {
			continue
		}
		sums, err := parseDigestHeader(v, name == "Repr-Digest")
		if err != nil {
			return nil, fmt.Errorf("the server's %s header %w", name, err)
		}
		for _, s := range sums {
			out = append(out, headerDigest{header: name, hex: s})
		}
	}
	return out, nil
}

// parseDigestHeader reads the sha-256 members of a Repr-Digest value
// (a structured-field dictionary: sha-256=:<base64>:, with optional
// ;parameters) or, when !structured, a Digest value (SHA-256=<base64>,
// names in any case). It returns each sha-256 as hex.
func parseDigestHeader(v string, structured bool) ([]string, error) {
	var out []string
	for member := range strings.SplitSeq(v, ",") {
		member = strings.Trim(member, " \t")
		if member == "" {
			continue
		}
		key, val, _ := strings.Cut(member, "=")
		key = strings.Trim(key, " \t")
		if !strings.EqualFold(key, "sha-256") || (structured && key != "sha-256") {
			continue
		}
		val, _, _ = strings.Cut(val, ";")
		val = strings.Trim(val, " \t")
		if structured {
			inner, pre := strings.CutPrefix(val, ":")
			inner, suf := strings.CutSuffix(inner, ":")
			if !pre || !suf {
				return nil, fmt.Errorf("has sha-256 %.80q, not a :base64: byte sequence: %w", val, loader.ErrVerification)
			}
			val = inner
		}
		b, err := decodeBase64(val)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("has sha-256 %.80q, not base64 of 32 bytes: %w", val, loader.ErrVerification)
		}
		out = append(out, hex.EncodeToString(b))
	}
	return out, nil
}

// decodeBase64 accepts standard base64 with or without padding.
func decodeBase64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// agreeingSHA256 returns the one SHA-256 that the user gave and the server
// sent, or "" when neither did; when they differ the file is not fetched.
func agreeingSHA256(given string, server []headerDigest) (string, error) {
	want, from := given, "the given sha256"
	for _, d := range server {
		if want == "" {
			want, from = d.hex, "the server's "+d.header+" header"
			continue
		}
		if d.hex != want {
			return "", fmt.Errorf("the server's %s header says sha256 %s, but %s is %s: %w", d.header, d.hex, from, want, loader.ErrVerification)
		}
	}
	return want, nil
}
