package annotations

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

var (
	// bucketRE is an s3/gs bucket: lower-case DNS-ish, 3 to 63 characters.
	bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$`)
	// ociRepoRE is an OCI repository: lower-case path components joined by
	// the separators the distribution spec allows.
	ociRepoRE = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	// ociTagRE is an OCI tag.
	ociTagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)
	// ociDigestRE is the one digest form modelgate accepts.
	ociDigestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// maxRevisionLength bounds an hf revision; git refs are rarely longer.
const maxRevisionLength = 255

// ParseModelURI parses a modelgate.io/model value: one of
//
//	s3://bucket[/path]
//	gs://bucket[/path]
//	hf://org/repo[@revision]
//	pvc://claim[/sub/path]
//	https://host[:port]/path[?query][#sha256=<64 hex digits>]
//	oci://registry[:port]/repo(:tag|@sha256:<digest>)
//
// Credentials never belong in the URI, as user information or as a
// signature or token in the query: they go in the Secret named by
// modelgate.io/model-credentials. The one fragment accepted is an https
// file's expected digest, "#sha256=<hex>" (ModelURI.SHA256). On success
// Raw is s, Scheme is one of Schemes and Path has no leading slash.
func ParseModelURI(s string) (ModelURI, error) {
	if s == "" {
		return ModelURI{}, errors.New("must not be empty")
	}
	if strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return ModelURI{}, errors.New("must not contain spaces, control or non-ASCII characters (percent-encode them)")
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return ModelURI{}, fmt.Errorf("must be a URI like s3://bucket/path (supported schemes: %s)", schemeList())
	}
	var (
		u   ModelURI
		err error
	)
	switch Scheme(scheme) {
	case SchemeS3, SchemeGS:
		u, err = parseBucketURI(Scheme(scheme), rest)
	case SchemeHF:
		u, err = parseHFURI(rest)
	case SchemePVC:
		u, err = parsePVCURI(rest)
	case SchemeHTTPS:
		u, err = parseHTTPSURI(s)
	case SchemeOCI:
		u, err = parseOCIURI(rest)
	default:
		return ModelURI{}, fmt.Errorf("unsupported scheme %q (supported: %s)", scheme, schemeList())
	}
	if err != nil {
		return ModelURI{}, err
	}
	u.Raw, u.Scheme = s, Scheme(scheme)
	return u, nil
}

// schemeList is Schemes as messages show them: "s3, gs, hf, pvc, https, oci".
func schemeList() string {
	names := make([]string, len(Schemes))
	for i, s := range Schemes {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func parseBucketURI(scheme Scheme, rest string) (ModelURI, error) {
	bucket, p, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return ModelURI{}, fmt.Errorf("must name a bucket: %s://bucket/path", scheme)
	}
	if !bucketRE.MatchString(bucket) {
		return ModelURI{}, fmt.Errorf("bucket %q must be 3 to 63 characters of a-z, 0-9, '.', '-' and '_', "+
			"starting and ending with a letter or digit", bucket)
	}
	if err := checkRelativePath(p); err != nil {
		return ModelURI{}, err
	}
	return ModelURI{Host: bucket, Path: p}, nil
}

func parseHFURI(rest string) (ModelURI, error) {
	repo, rev, hasRev := strings.Cut(rest, "@")
	org, name, ok := strings.Cut(repo, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") {
		return ModelURI{}, errors.New("must be hf://org/repo or hf://org/repo@revision")
	}
	for _, seg := range []string{org, name} {
		if !isHFName(seg) || strings.Contains(seg, "..") {
			return ModelURI{}, fmt.Errorf("hf name %q must be at most 96 letters, digits, '.', '_' and '-', "+
				"not starting or ending with '.' or '-' and without \"..\"", seg)
		}
	}
	if hasRev {
		if rev == "" {
			return ModelURI{}, errors.New("hf revision after '@' must not be empty")
		}
		if len(rev) > maxRevisionLength || !isHFRevision(rev) || strings.Contains(rev, "..") {
			return ModelURI{}, fmt.Errorf("hf revision %q must be a branch, tag or commit: at most %d letters, digits, "+
				"'.', '_', '-' and '/', without \"..\" or empty path segments", rev, maxRevisionLength)
		}
	}
	return ModelURI{Path: org + "/" + name, Revision: rev}, nil
}

// isHFName reports whether s is a Hugging Face organization or repository
// name: 1 to 96 letters, digits, '.', '_' and '-', neither first nor last
// '.' or '-'. (It is the regular expression
// ^[A-Za-z0-9_]([A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$, matched without the
// regexp package's cost on every admission review.)
func isHFName(s string) bool {
	if len(s) == 0 || len(s) > 96 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHFNameByte(s[i]) {
			return false
		}
	}
	first, last := s[0], s[len(s)-1]
	return first != '.' && first != '-' && last != '.' && last != '-'
}

// isHFRevision reports whether s is a Hugging Face branch, tag or commit:
// non-empty runs of letters, digits, '.', '_' and '-' joined by '/' (the
// regular expression ^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$).
func isHFRevision(s string) bool {
	if s == "" || s[0] == '/' || s[len(s)-1] == '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/':
			if s[i-1] == '/' {
				return false
			}
		case !isHFNameByte(c):
			return false
		}
	}
	return true
}

func isHFNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

func parsePVCURI(rest string) (ModelURI, error) {
	claim, sub, _ := strings.Cut(rest, "/")
	if claim == "" {
		return ModelURI{}, errors.New("must name a claim: pvc://claim[/sub/path]")
	}
	if msgs := validation.IsDNS1123Subdomain(claim); len(msgs) > 0 {
		return ModelURI{}, fmt.Errorf("claim %q is not a valid PersistentVolumeClaim name: %s", claim, strings.Join(msgs, "; "))
	}
	if err := checkRelativePath(sub); err != nil {
		return ModelURI{}, err
	}
	return ModelURI{Claim: claim, Path: strings.TrimSuffix(sub, "/")}, nil
}

func parseHTTPSURI(s string) (ModelURI, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the whole URL, which may hold a signature.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return ModelURI{}, fmt.Errorf("is not a valid https URL: %w", err)
	}
	if u.User != nil {
		return ModelURI{}, errCredentialsInURI
	}
	if key := credentialInQuery(u.RawQuery); key != "" {
		return ModelURI{}, credentialInQueryError(key)
	}
	if u.Host == "" {
		return ModelURI{}, errors.New("must name a host: https://host/path")
	}
	if err := checkHost(u.Hostname(), u.Port()); err != nil {
		return ModelURI{}, err
	}
	digest := ""
	if _, frag, ok := strings.Cut(s, "#"); ok {
		if digest, err = parseDigestFragment(frag); err != nil {
			return ModelURI{}, err
		}
	}
	p := strings.TrimPrefix(u.Path, "/")
	if !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return ModelURI{}, errors.New("path must not encode control characters or invalid UTF-8")
	}
	if p == "" {
		return ModelURI{}, errors.New("must name a model file or folder: https://host/path/model.safetensors")
	}
	if err := checkRelativePath(p); err != nil {
		return ModelURI{}, err
	}
	return ModelURI{Host: u.Host, Path: p, SHA256: digest}, nil
}

func parseOCIURI(rest string) (ModelURI, error) {
	registry, ref, _ := strings.Cut(rest, "/")
	if registry == "" {
		return ModelURI{}, errors.New("must name a registry: oci://registry/repo:tag")
	}
	if strings.Contains(registry, "@") {
		return ModelURI{}, errCredentialsInURI
	}
	host, port := registry, ""
	if h, p, err := net.SplitHostPort(registry); err == nil {
		host, port = h, p
	}
	if err := checkHost(strings.Trim(host, "[]"), port); err != nil {
		return ModelURI{}, err
	}
	if !strings.ContainsAny(registry, ".:") && registry != "localhost" {
		return ModelURI{}, fmt.Errorf("registry %q must be a host name with a dot or a port, or localhost "+
			"(for example oci://ghcr.io/org/model:v1)", registry)
	}
	if ref == "" {
		return ModelURI{}, errors.New("must name a repository: oci://registry/repo:tag")
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest && !ociDigestRE.MatchString(digest) {
		return ModelURI{}, fmt.Errorf("digest %q must be sha256: followed by 64 lower-case hex digits", digest)
	}
	repo, tag := name, ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		repo, tag = name[:i], name[i+1:]
		if !ociTagRE.MatchString(tag) {
			return ModelURI{}, fmt.Errorf("tag %q must be 1 to 128 letters, digits, '_', '.' and '-', "+
				"not starting with '.' or '-'", tag)
		}
	}
	if len(repo) > 255 || !ociRepoRE.MatchString(repo) {
		return ModelURI{}, fmt.Errorf("repository %q must be lower-case path components of a-z and 0-9 "+
			"joined by '.', '_', '__' or '-', separated by '/' (for example org/model)", repo)
	}
	if tag == "" && !hasDigest {
		return ModelURI{}, errors.New("must name a tag or a digest so the model is reproducible " +
			"(for example oci://ghcr.io/org/model:v1 or oci://ghcr.io/org/model@sha256:<64 hex digits>)")
	}
	return ModelURI{Host: registry, Path: repo, Tag: tag, Digest: digest}, nil
}

// errCredentialsInURI rejects user:password@ in a URI.
var errCredentialsInURI = errors.New("must not contain credentials (user:password@); " +
	"put them in a Secret and name it in " + ModelCredentials)

// checkHost accepts a DNS name or an IP address, and an optional port.
func checkHost(host, port string) error {
	if host == "" {
		return errors.New("must name a host")
	}
	if net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return fmt.Errorf("host %q must be a DNS name or an IP address", host)
	}
	if port == "" {
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	return nil
}

// checkRelativePath rejects the segments a loader could misread in an
// object path or sub path: empty ones (a leading or doubled slash; a
// trailing slash is fine), "." and "..".
func checkRelativePath(p string) error {
	if p == "" {
		return nil
	}
	segs := strings.Split(strings.TrimSuffix(p, "/"), "/")
	for _, seg := range segs {
		switch seg {
		case "":
			return fmt.Errorf("path %q must be relative, without empty segments (\"//\")", p)
		case ".", "..":
			return fmt.Errorf("path %q must not contain %q segments", p, seg)
		}
	}
	return nil
}

// isCommitHash reports whether s is a full git commit hash (40 lower-case
// hex digits).
func isCommitHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
