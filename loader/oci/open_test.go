package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/modelgate/modelgate/loader"
)

// weightsFile lists the ModelPack model at r and returns its weights file
// and content.
func weightsFile(t *testing.T, r *testRegistry, s *Source) (*loader.File, []byte) {
	t.Helper()
	_, _, weights := modelPack(t, r.pusher(t, "org/modelpack"))
	l, err := s.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for i := range l.Files {
		if l.Files[i].Path == "model.safetensors" {
			return &l.Files[i], weights
		}
	}
	t.Fatalf("no model.safetensors in %+v", l.Files)
	return nil, nil
}

func TestOpenRanges(t *testing.T) {
	for _, mode := range []string{"registry", "redirect to blob storage"} {
		t.Run(mode, func(t *testing.T) {
			r := newTestRegistry(t)
			r.user, r.pass = "u", "p"
			r.redirect = mode != "registry"
			s := r.source(t, "org/modelpack", "v1", "", map[string]string{EnvUsername: "u", EnvPassword: "p"})
			f, weights := weightsFile(t, r, s)
			if f.Sequential {
				t.Fatalf("file is Sequential though the registry serves ranges")
			}
			size := int64(len(weights))
			cases := map[string]struct{ off, n int64 }{
				"first byte":    {0, 1},
				"head":          {0, 4096},
				"middle":        {123457, 65536},
				"last byte":     {size - 1, 1},
				"tail":          {size - 1000, 1000},
				"whole":         {0, size},
				"all but first": {1, size - 1},
			}
			for name, tc := range cases {
				t.Run(name, func(t *testing.T) {
					got, err := readAll(t, s, f, tc.off, tc.n)
					if err != nil {
						t.Fatalf("Open(%d, %d): %v", tc.off, tc.n, err)
					}
					if !bytes.Equal(got, weights[tc.off:tc.off+tc.n]) {
						t.Errorf("Open(%d, %d) gave %d bytes that differ from the blob's", tc.off, tc.n, len(got))
					}
				})
			}
			if r.redirect && r.storageGets.Load() == 0 {
				t.Errorf("no read reached blob storage")
			}
			if n := r.storageAuths.Load(); n != 0 {
				t.Errorf("blob storage got the registry's Authorization %d times", n)
			}
		})
	}
}

func TestOpenSequential(t *testing.T) {
	r := newTestRegistry(t)
	r.noRanges = true
	s := r.source(t, "org/modelpack", "v1", "", nil)
	f, weights := weightsFile(t, r, s)
	if !f.Sequential {
		t.Fatalf("file is not Sequential though the registry ignores ranges")
	}
	before := r.rangedGets.Load()
	got, err := readAll(t, s, f, 0, f.Size)
	if err != nil {
		t.Fatalf("Open whole: %v", err)
	}
	if !bytes.Equal(got, weights) {
		t.Errorf("whole read differs from the blob")
	}
	if n := r.rangedGets.Load() - before; n != 0 {
		t.Errorf("a whole read sent %d Range requests", n)
	}
	if _, err := s.Open(context.Background(), f, 10, 10); !errors.Is(err, loader.ErrVerification) {
		t.Errorf("ranged Open on a registry without ranges = %v, want %v", err, loader.ErrVerification)
	}
}

func TestOpenErrors(t *testing.T) {
	r := newTestRegistry(t)
	s := r.source(t, "org/modelpack", "v1", "", nil)
	f, _ := weightsFile(t, r, s)
	missing := *f
	missing.Key = "sha256:" + fmt.Sprintf("%064x", 1)
	bad := *f
	bad.Key = "../../etc/passwd"
	cases := map[string]struct {
		f       *loader.File
		off, n  int64
		wantErr error
	}{
		"blob not in repository": {f: &missing, off: 0, n: 1, wantErr: loader.ErrNotFound},
		"key not a digest":       {f: &bad, off: 0, n: 1, wantErr: loader.ErrInvalid},
		"past the end":           {f: f, off: f.Size - 1, n: 2, wantErr: loader.ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := s.Open(context.Background(), tc.f, tc.off, tc.n)
			if diff := cmp.Diff(tc.wantErr, loader.Kind(err), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("Open error kind (-want +got):\n%s\n(error: %v)", diff, err)
			}
		})
	}
}
