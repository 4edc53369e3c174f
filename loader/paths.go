package loader

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxPathLength bounds a file's path inside the model, in bytes.
const MaxPathLength = 1024

// reserved are the top-level names Load keeps for itself in the
// destination.
var reserved = []string{StateDir, HFCacheDir[:strings.IndexByte(HFCacheDir, '/')]}

// CleanPath checks a file's path, as a source listed it, and returns it
// in canonical form: relative, slash separated, no empty, "." or ".."
// segments, no NUL or backslash, valid UTF-8, not under a name Load
// reserves. Object keys are opaque strings; CleanPath is where they
// become paths, so that nothing is ever written outside the destination.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path must not be empty: %w", ErrInvalid)
	case len(p) > MaxPathLength:
		return "", fmt.Errorf("path %.64q... is longer than %d bytes: %w", p, MaxPathLength, ErrInvalid)
	case !utf8.ValidString(p):
		return "", fmt.Errorf("path %q is not valid UTF-8: %w", p, ErrInvalid)
	case strings.ContainsAny(p, "\x00\\"):
		return "", fmt.Errorf("path %q must not contain NUL or backslash: %w", p, ErrInvalid)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q must be relative: %w", p, ErrInvalid)
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "", ".", "..":
			return "", fmt.Errorf("path %q must not have empty, \".\" or \"..\" segments: %w", p, ErrInvalid)
		}
		for _, r := range seg {
			if r < ' ' || r == 0x7f {
				return "", fmt.Errorf("path %q must not contain control characters: %w", p, ErrInvalid)
			}
		}
	}
	first, _, _ := strings.Cut(p, "/")
	for _, r := range reserved {
		if first == r {
			return "", fmt.Errorf("path %q is under %q, which the loader keeps for itself: %w", p, r, ErrInvalid)
		}
	}
	if c := path.Clean(p); c != p {
		return "", fmt.Errorf("path %q is not clean (%q): %w", p, c, ErrInvalid)
	}
	return p, nil
}

// RelativeKey returns key relative to prefix, as an exact path prefix:
// prefix "a/b" matches "a/b" itself (a single object, returned as its base
// name) and "a/b/..." (returned without "a/b/"), never "a/bc". A prefix
// ending in "/" matches only below it. ok is false when key is not under
// prefix.
func RelativeKey(prefix, key string) (rel string, ok bool) {
	if prefix == "" {
		return key, key != ""
	}
	if key == prefix && !strings.HasSuffix(prefix, "/") {
		return path.Base(key), true
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	rel, ok = strings.CutPrefix(key, prefix)
	if !ok || rel == "" {
		return "", false
	}
	return rel, true
}
