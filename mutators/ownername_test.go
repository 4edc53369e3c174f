package mutators

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// digest is the 8 hex digits OwnerLabelValue documents for long or
// unprintable names: the first 4 bytes of the SHA-256 of the full name.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

var (
	long200  = strings.Repeat("a", 54) + strings.Repeat("b", 146)
	long200b = strings.Repeat("a", 54) + strings.Repeat("c", 146)
)

func TestOwnerLabelValue(t *testing.T) {
	cases := map[string]struct {
		username  string
		wantValue string
		wantFull  string
	}{
		"plain":                 {username: "alice", wantValue: "alice"},
		"plain with dots":       {username: "alice.smith-2_x", wantValue: "alice.smith-2_x"},
		"email":                 {username: "alice@example.com", wantValue: "alice_example.com", wantFull: "alice@example.com"},
		"service account":       {username: "system:serviceaccount:ci:deployer", wantValue: "sa.ci.deployer", wantFull: "system:serviceaccount:ci:deployer"},
		"service account bare":  {username: "system:serviceaccount:", wantValue: "system_serviceaccount", wantFull: "system:serviceaccount:"},
		"service account no sa": {username: "system:serviceaccount:ci", wantValue: "system_serviceaccount_ci", wantFull: "system:serviceaccount:ci"},
		"service account empty ns": {
			username: "system:serviceaccount::deployer", wantValue: "system_serviceaccount__deployer",
			wantFull: "system:serviceaccount::deployer",
		},
		"controller user": {username: "system:kube-controller-manager", wantValue: "system_kube-controller-manager", wantFull: "system:kube-controller-manager"},
		"oidc": {
			username: "https://issuer.example.com#1234", wantValue: "https___issuer.example.com_1234",
			wantFull: "https://issuer.example.com#1234",
		},
		"leading and trailing punctuation": {username: "-_.bob._-", wantValue: "bob", wantFull: "-_.bob._-"},
		"non-ascii":                        {username: "josé", wantValue: "jos", wantFull: "josé"},
		"exactly 63":                       {username: strings.Repeat("x", 63), wantValue: strings.Repeat("x", 63)},
		"64 characters": {
			username: strings.Repeat("x", 64), wantValue: strings.Repeat("x", 54) + "-" + digest(strings.Repeat("x", 64)),
			wantFull: strings.Repeat("x", 64),
		},
		"200 characters": {username: long200, wantValue: strings.Repeat("a", 54) + "-" + digest(long200), wantFull: long200},
		"long, cut at punctuation": {
			username:  strings.Repeat("a", 50) + "@@@@@@@@" + strings.Repeat("z", 20),
			wantValue: strings.Repeat("a", 50) + "-" + digest(strings.Repeat("a", 50)+"@@@@@@@@"+strings.Repeat("z", 20)),
			wantFull:  strings.Repeat("a", 50) + "@@@@@@@@" + strings.Repeat("z", 20),
		},
		"only punctuation": {username: "@@@", wantValue: "u-" + digest("@@@"), wantFull: "@@@"},
		"only colons":      {username: ":::", wantValue: "u-" + digest(":::"), wantFull: ":::"},
		"empty":            {username: "", wantValue: "", wantFull: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			value, full := OwnerLabelValue(tc.username)
			if value != tc.wantValue {
				t.Errorf("value = %q, want %q", value, tc.wantValue)
			}
			if full != tc.wantFull {
				t.Errorf("full = %q, want %q", full, tc.wantFull)
			}
			if tc.username == "" {
				return
			}
			if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
				t.Errorf("value %q is not a valid label value: %v", value, msgs)
			}
			if v2, f2 := OwnerLabelValue(tc.username); v2 != value || f2 != full {
				t.Errorf("not deterministic: (%q, %q) then (%q, %q)", value, full, v2, f2)
			}
		})
	}
}

func TestOwnerLabelValueLongNames(t *testing.T) {
	suffix := regexp.MustCompile(`-[0-9a-f]{8}$`)
	a, _ := OwnerLabelValue(long200)
	b, _ := OwnerLabelValue(long200b)
	for _, v := range []string{a, b} {
		if len(v) > validation.LabelValueMaxLength {
			t.Errorf("value %q has %d characters, want at most %d", v, len(v), validation.LabelValueMaxLength)
		}
		if !suffix.MatchString(v) {
			t.Errorf("value %q does not end with '-' and 8 hex digits", v)
		}
	}
	if a == b {
		t.Errorf("two long names sharing a 54-character prefix map to the same value %q", a)
	}
}
