package mutators

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const serviceAccountPrefix = "system:serviceaccount:"

// OwnerLabelValue turns an authenticated user name into a valid label value.
//
// A service account (system:serviceaccount:<ns>:<name>) becomes
// sa.<ns>.<name>; any character a label value cannot hold becomes '_';
// leading and trailing punctuation is trimmed; a value longer than 63
// characters is cut to 54 and suffixed with '-' and 8 hex digits of the
// SHA-256 of the full name, so distinct long names stay distinct.
//
// full is the original user name when value differs from it (the caller
// keeps it in the modelgate.io/owner-full annotation), and empty otherwise.
// An empty user name gives an empty value.
func OwnerLabelValue(username string) (value, full string) {
	if username == "" {
		return "", ""
	}
	v := username
	if rest, ok := strings.CutPrefix(username, serviceAccountPrefix); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok && ns != "" && name != "" {
			v = "sa." + ns + "." + name
		}
	}
	v = strings.Map(func(r rune) rune {
		if isLabelChar(r) {
			return r
		}
		return '_'
	}, v)
	v = strings.TrimFunc(v, func(r rune) bool { return !isAlphaNum(r) })
	if len(v) > validation.LabelValueMaxLength {
		sum := sha256.Sum256([]byte(username))
		head := strings.TrimRightFunc(v[:validation.LabelValueMaxLength-9], func(r rune) bool { return !isAlphaNum(r) })
		v = head + "-" + hex.EncodeToString(sum[:4])
	}
	if v == "" {
		// Nothing printable survived: identify the user by digest alone.
		sum := sha256.Sum256([]byte(username))
		v = "u-" + hex.EncodeToString(sum[:4])
	}
	if v == username {
		return v, ""
	}
	return v, username
}

func isAlphaNum(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
}

func isLabelChar(r rune) bool {
	return isAlphaNum(r) || r == '-' || r == '_' || r == '.'
}
