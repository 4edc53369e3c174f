package annotations

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// credentialParams are the query parameters (lower case) that carry a
// credential in a signed or tokenized URL: S3 presigned URLs (SigV4),
// Google Cloud Storage V4 signed URLs, Azure shared access signatures
// (sig), and the usual token and key parameters.
var credentialParams = []string{
	"x-amz-signature", "x-amz-credential", "x-amz-security-token",
	"x-goog-signature", "x-goog-credential",
	"sig",
	"token", "access_token", "api_key", "apikey", "auth", "password",
}

// A CloudFront signed URL carries its credential in Signature, beside
// Key-Pair-Id; a parameter named Signature alone is not taken for one.
const (
	cloudFrontSignature = "signature"
	cloudFrontKeyPairID = "key-pair-id"
)

// sha256FragmentRE is the one fragment an https model accepts: the file's
// expected digest, as pip writes it.
var sha256FragmentRE = regexp.MustCompile(`^sha256=[0-9a-f]{64}$`)

// queryParam is one parameter of a raw query: its key as written and, for
// matching, unescaped (when it can be) in lower case.
type queryParam struct {
	key, match string
	hasValue   bool
}

// queryParams splits a raw query into its parameters, on '&' and on ';'
// (servers differ on ';', so both count).
func queryParams(q string) []queryParam {
	var out []queryParam
	for _, pair := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
		key, value, _ := strings.Cut(pair, "=")
		out = append(out, queryParam{key: key, match: paramMatch(key), hasValue: value != ""})
	}
	return out
}

// paramMatch is a parameter's key as it is compared: unescaped when it can
// be, in lower case.
func paramMatch(key string) string {
	m, err := url.QueryUnescape(key)
	if err != nil {
		m = key
	}
	return strings.ToLower(m)
}

// credentialInQuery returns the key, as written, of the first parameter of
// a raw query that carries a credential; empty when none does. A parameter
// with no value carries nothing.
func credentialInQuery(q string) string {
	params := queryParams(q)
	cloudFront := false
	for _, p := range params {
		if p.match == cloudFrontKeyPairID && p.hasValue {
			cloudFront = true
		}
	}
	for _, p := range params {
		if !p.hasValue {
			continue
		}
		if isCredentialParam(p.match) || (cloudFront && p.match == cloudFrontSignature) {
			return p.key
		}
	}
	return ""
}

func isCredentialParam(match string) bool {
	for _, c := range credentialParams {
		if match == c {
			return true
		}
	}
	return false
}

// credentialInQueryError rejects a URI whose query carries a credential.
// It names the parameter, never its value.
func credentialInQueryError(key string) error {
	return fmt.Errorf("must not carry a credential in its query (parameter %q): a credential in a pod spec "+
		"is readable by anyone who can read the pod; put it in a Secret named by %s, or use an unsigned URL",
		key, ModelCredentials)
}

// parseDigestFragment reads the fragment of an https model URI (the text
// after '#'): "sha256=<64 lower-case hex digits>", the expected digest of
// the file. It returns the digest. The message never repeats the fragment,
// which may hold a token.
func parseDigestFragment(frag string) (string, error) {
	if !sha256FragmentRE.MatchString(frag) {
		return "", errors.New("fragment must be #sha256=<64 lower-case hex digits>, the expected SHA-256 of the file " +
			"(as pip writes it); no other fragment is accepted")
	}
	return strings.TrimPrefix(frag, "sha256="), nil
}

// RedactURI hides what may be secret in a model URI, for messages: the
// user information, the value of every credential query parameter (a
// Signature too, with or without Key-Pair-Id) and any fragment other than
// "#sha256=<hex>". The rest stays as written, so that users recognize
// their value.
func RedactURI(s string) string {
	rest, frag, hasFrag := strings.Cut(s, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	out := redactUserInfo(rest)
	if hasQuery {
		out += "?" + redactQuery(query)
	}
	if hasFrag {
		if sha256FragmentRE.MatchString(frag) {
			out += "#" + frag
		} else {
			out += "#redacted"
		}
	}
	return out
}

// redactQuery replaces the values of the credential parameters of a raw
// query with "redacted", keeping everything else as written.
func redactQuery(q string) string {
	var b strings.Builder
	start := 0
	for i := 0; i <= len(q); i++ {
		if i < len(q) && q[i] != '&' && q[i] != ';' {
			continue
		}
		pair := q[start:i]
		if key, _, ok := strings.Cut(pair, "="); ok {
			if m := paramMatch(key); isCredentialParam(m) || m == cloudFrontSignature {
				pair = key + "=redacted"
			}
		}
		b.WriteString(pair)
		if i < len(q) {
			b.WriteByte(q[i])
		}
		start = i + 1
	}
	return b.String()
}

// redactUserInfo hides the user information of a URI (without its query
// and fragment).
func redactUserInfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || Scheme(scheme) == SchemeHF {
		return s // hf uses '@' for the revision
	}
	authority, tail, _ := strings.Cut(rest, "/")
	i := strings.LastIndexByte(authority, '@')
	if i < 0 {
		return s
	}
	out := scheme + "://redacted@" + authority[i+1:]
	if len(authority) < len(rest) {
		out += "/" + tail
	}
	return out
}
