package mutators

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzOwnerLabelValue checks OwnerLabelValue's contract on arbitrary user
// names: the value is always a valid label value, never empty for a
// non-empty name, the same on every call, and full is set exactly when the
// value differs from the name.
func FuzzOwnerLabelValue(f *testing.F) {
	for _, s := range []string{
		"alice", "alice@example.com", "system:serviceaccount:ci:deployer", "system:serviceaccount:",
		"system:serviceaccount::x", "system:kube-controller-manager", "https://issuer.example.com#1234",
		long200, long200b, strings.Repeat("a", 63), "@@@", "", "josé", "\xff\xfe", "a\x00b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, username string) {
		value, full := OwnerLabelValue(username)
		if username == "" {
			if value != "" || full != "" {
				t.Fatalf("OwnerLabelValue(\"\") = (%q, %q), want empty", value, full)
			}
			return
		}
		if value == "" {
			t.Fatalf("OwnerLabelValue(%q) is empty", username)
		}
		if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
			t.Fatalf("OwnerLabelValue(%q) = %q, not a valid label value: %v", username, value, msgs)
		}
		if v2, f2 := OwnerLabelValue(username); v2 != value || f2 != full {
			t.Fatalf("OwnerLabelValue(%q) not deterministic: (%q, %q) then (%q, %q)", username, value, full, v2, f2)
		}
		if (full == "") != (value == username) {
			t.Fatalf("OwnerLabelValue(%q) = (%q, %q): full must be empty exactly when value is the name", username, value, full)
		}
		if full != "" && full != username {
			t.Fatalf("OwnerLabelValue(%q) full = %q, want the name", username, full)
		}
	})
}
