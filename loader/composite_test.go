package loader_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
	"github.com/modelgate/modelgate/loader/loadertest"
)

// compositeOf is S3's multipart ETag of c uploaded in parts of partSize:
// the MD5 of the parts' MD5s, and the part count.
func compositeOf(c loadertest.Content, partSize int64) *loader.Composite {
	outer := md5.New()
	n := 0
	for off := int64(0); off < c.Size(); off += partSize {
		h := md5.New()
		if _, err := io.Copy(h, io.NewSectionReader(c, off, min(partSize, c.Size()-off))); err != nil {
			panic(err)
		}
		outer.Write(h.Sum(nil))
		n++
	}
	return &loader.Composite{Algorithm: loader.MD5, Hex: hex.EncodeToString(outer.Sum(nil)), Parts: n, PartSize: partSize}
}

// compositeSource lists every file with its multipart ETag and nothing
// else, as S3 does for an object a multipart upload wrote without
// checksums; wrong, when set, lists a wrong one for that file.
type compositeSource struct {
	loader.Source
	files    map[string]loadertest.Content
	partSize int64
	wrong    string
}

func (s compositeSource) List(ctx context.Context) (*loader.Listing, error) {
	l, err := s.Source.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range l.Files {
		f := &l.Files[i]
		f.Digests = nil
		if c := s.files[f.Path]; c.Size() > 0 {
			f.Composite = compositeOf(c, s.partSize)
			if f.Path == s.wrong {
				f.Composite.Hex = strings.Repeat("0", 32)
			}
		}
	}
	return l, nil
}

// A multipart upload's ETag is checked part by part: the file is fetched in
// the upload's parts (700,000 bytes here, not the loader's 1 MiB), each
// part's MD5 computed as it arrives, and the MD5 of them compared; a
// corrupted byte is caught and the file fetched again, a wrong ETag fails.
func TestCompositeDigest(t *testing.T) {
	const partSize = 700_000
	for name, tc := range map[string]struct {
		fault loadertest.Fault
		wrong string
		kind  error
	}{
		"verified":                        {},
		"a corrupted byte, fetched again": {fault: loadertest.Fault{Path: "model-00001-of-00002.safetensors", Times: 1, Corrupt: true, CorruptAt: 3*partSize + 5}},
		"a wrong multipart ETag":          {wrong: "model-00002-of-00002.safetensors", kind: loader.ErrVerification},
		"a corrupted byte, every time":    {fault: loadertest.Fault{Path: "tokenizer/tokenizer.json", Corrupt: true, CorruptAt: 17}, kind: loader.ErrVerification},
	} {
		t.Run(name, func(t *testing.T) {
			files := model()
			srv := loadertest.NewServer(files)
			defer srv.Close()
			if tc.fault.Path != "" {
				srv.Inject(tc.fault)
			}
			dest := t.TempDir()
			src := compositeSource{Source: srv.Source(nil), files: files, partSize: partSize, wrong: tc.wrong}
			res, err := loader.Load(context.Background(), src, fastOptions(dest, "s3://b/m"))
			if tc.kind != nil {
				if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), "parts' md5 digests") {
					t.Fatalf("error = %v, want %v naming the parts' digests", err, tc.kind)
				}
				assertIncomplete(t, dest)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want(files), sums(t, dest)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if res.Verified != len(files)-1 { // empty.txt has nothing to check
				t.Errorf("%d files verified, want %d", res.Verified, len(files)-1)
			}
			m := readManifest(t, dest)
			for _, f := range m.Files {
				c := files[f.Path]
				if c.Size() == 0 {
					continue
				}
				cm := compositeOf(c, partSize)
				want := []loader.Digest{{Algorithm: "md5" + loader.CompositeSuffix, Hex: fmt.Sprintf("%s-%d", cm.Hex, cm.Parts)}}
				if diff := cmp.Diff(want, f.Digests); diff != "" || !f.Verified {
					t.Errorf("%s: manifest digests (-want +got):\n%s (verified %v)", f.Path, diff, f.Verified)
				}
			}
		})
	}
}
