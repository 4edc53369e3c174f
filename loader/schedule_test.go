package loader

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInterleave: the parts of files hashed in order are handed out
// round-robin across those files, in the places they held; the parts of
// files verified part by part, or by size, keep their places.
func TestInterleave(t *testing.T) {
	sha := []Digest{{Algorithm: SHA256}}
	crc := []Digest{{Algorithm: CRC64NVME}}
	job := func(name string, digests []Digest, parts int) []*part {
		f := &File{Path: name, Size: int64(parts) * 10, Digests: digests}
		j := newFileJob(f, name, name, 10)
		var out []*part
		for i := range parts {
			out = append(out, &part{job: j, idx: i})
		}
		return out
	}
	cat := func(ps ...[]*part) []*part {
		var out []*part
		for _, p := range ps {
			out = append(out, p...)
		}
		return out
	}
	for name, tc := range map[string]struct {
		parts []*part
		want  []string
	}{
		"one file": {parts: job("a", sha, 3), want: []string{"a0", "a1", "a2"}},
		"files hashed in order": {
			parts: cat(job("a", sha, 3), job("b", sha, 1), job("c", sha, 2)),
			want:  []string{"a0", "b0", "c0", "a1", "c1", "a2"},
		},
		"files verified part by part keep their places": {
			parts: cat(job("a", sha, 2), job("x", crc, 2), job("b", sha, 2), job("y", nil, 1)),
			want:  []string{"a0", "b0", "x0", "x1", "a1", "b1", "y0"},
		},
		"none hashed in order": {
			parts: cat(job("x", crc, 2), job("y", crc, 2)),
			want:  []string{"x0", "x1", "y0", "y1"},
		},
		"empty": {},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range interleave(tc.parts) {
				got = append(got, fmt.Sprintf("%s%d", p.job.f.Path, p.idx))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}
