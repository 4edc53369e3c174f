package pack

import (
	"archive/tar"
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHeaderOfAHugeFile: a file of 8 GiB or more, beyond what USTAR can
// say, is a PAX entry with its size.
func TestPackHeaderOfAHugeFile(t *testing.T) {
	cases := map[string]struct {
		size   int64
		format tar.Format
	}{
		"just under 8 GiB": {size: 8<<30 - 1, format: tar.FormatUSTAR},
		"10 GiB":           {size: 10 << 30, format: tar.FormatPAX},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tar.NewWriter(&buf).WriteHeader(header(entry{name: "weights.bin", kind: kindFile, size: tc.size})); err != nil {
				t.Fatal(err)
			}
			h, err := tar.NewReader(&buf).Next()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.size, tc.format}, []any{h.Size, h.Format}); diff != "" {
				t.Errorf("size and format (-want +got):\n%s", diff)
			}
		})
	}
}
