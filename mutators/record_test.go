package mutators

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	cases := map[string]Record{
		"one mutator":  {Mutators: []string{OwnerMetadataName}, Settings: "44136fa355b3"},
		"two mutators": {Mutators: []string{OwnerMetadataName, "model-loader"}, Settings: "0123456789ab"},
		"no mutators":  {Mutators: []string{}, Settings: ""},
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseRecord(r.String())
			if !ok {
				t.Fatalf("ParseRecord(%q) not ok", r.String())
			}
			if diff := cmp.Diff(r, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordString(t *testing.T) {
	r := Record{Mutators: []string{OwnerMetadataName}, Settings: "44136fa355b3"}
	want := `{"mutators":["owner-metadata"],"settings":"44136fa355b3"}`
	if got := r.String(); got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

func TestParseRecordInvalid(t *testing.T) {
	for name, s := range map[string]string{
		"empty":        "",
		"garbage":      "garbage",
		"truncated":    `{"mutators":["owner-metadata"`,
		"array":        `["owner-metadata"]`,
		"wrong types":  `{"mutators":"owner-metadata","settings":1}`,
		"plain string": `"owner-metadata"`,
	} {
		t.Run(name, func(t *testing.T) {
			if r, ok := ParseRecord(s); ok {
				t.Errorf("ParseRecord(%q) = %+v, ok; want not ok", s, r)
			}
		})
	}
}
