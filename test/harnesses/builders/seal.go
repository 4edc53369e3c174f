package builders

import "regexp"

// sealValue matches a modelgate.io/seal value in YAML or JSON.
var sealValue = regexp.MustCompile(`(modelgate\.io/seal"?:\s*"?)v1\.[A-Za-z0-9_-]+`)

// MaskSeals replaces every modelgate.io/seal value in a YAML or JSON
// document with "<seal>". A seal is an HMAC under a key each process makes
// for itself where no key is loaded (tests, modelgate render), so golden
// files hold where seals go, not their values.
func MaskSeals(s string) string { return sealValue.ReplaceAllString(s, "${1}<seal>") }
