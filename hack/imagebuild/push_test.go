package imagebuild

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush pushes the image to an in-process registry and pulls its index
// back under the digest Push returned.
func TestPush(t *testing.T) {
	_, idx := builtIndex(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/modelgate/modelgate:v9.8.7-test"

	got, err := Push(context.Background(), idx, ref)
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, idx)
	if got.DigestStr() != want.String() || got.Context().Name() != strings.TrimSuffix(ref, ":v9.8.7-test") {
		t.Errorf("Push returned %s, want %s@%s", got, strings.TrimSuffix(ref, ":v9.8.7-test"), want)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(tag)
	if err != nil {
		t.Fatalf("pulling the pushed index: %v", err)
	}
	if d := digest(t, pulled); d != want {
		t.Errorf("the registry has %s under the tag, want %s", d, want)
	}
	img, err := ImageFor(pulled, hostPlatform)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := img.ConfigFile(); err != nil {
		t.Errorf("reading the pushed image's config: %v", err)
	}

	if _, err := Push(context.Background(), idx, strings.TrimSuffix(ref, ":v9.8.7-test")+"@"+want.String()); err == nil {
		t.Error("Push to a digest reference: nil error, want one")
	}
}
