package pack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ErrBadImage says an image reference cannot be pushed to.
var ErrBadImage = errors.New("not an image reference to push to")

// ParseImage parses where an image is pushed: registry/repository:tag,
// each part written out (no default registry, no default tag: what is
// pushed where is never a guess). insecure lets the registry be reached
// over plain HTTP. A digest reference is refused: the digest is the
// content's, known once it is built.
func ParseImage(s string, insecure bool) (name.Tag, error) {
	if _, _, ok := strings.Cut(s, "://"); ok {
		return name.Tag{}, fmt.Errorf("%q is a URI; write the image without its scheme (registry/repository:tag): %w", s, ErrBadImage)
	}
	if strings.Contains(s, "@") {
		return name.Tag{}, fmt.Errorf("%q names a digest; name a tag (registry/repository:tag), the digest is the packed content's: %w", s, ErrBadImage)
	}
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	t, err := name.NewTag(s, opts...)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%q must be registry/repository:tag, the registry a host with a dot or a port (or localhost) "+
			"and the repository lower-case (%w): %w", s, err, ErrBadImage)
	}
	return t, nil
}

// PushOptions configure Push and Verify. The zero value takes the
// defaults.
type PushOptions struct {
	// Keychain gives the registry credentials (default
	// authn.DefaultKeychain: the Docker config and its helpers).
	Keychain authn.Keychain
	// Transport is the HTTP transport (default remote.DefaultTransport).
	Transport http.RoundTripper
	// Jobs is how many blobs are uploaded at once (default 4).
	Jobs int
	// Progress, when set, is called as Push uploads, with the bytes
	// written and the total to write (blobs the registry has already
	// count as written). Verify does not call it.
	Progress func(complete, total int64)
}

func (o PushOptions) remote(ctx context.Context) []remote.Option {
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if o.Transport != nil {
		opts = append(opts, remote.WithTransport(o.Transport))
	}
	if o.Jobs > 0 {
		opts = append(opts, remote.WithJobs(o.Jobs))
	}
	return opts
}

// Push writes idx to the registry under tag: the blobs the registry does
// not have yet, each manifest, then the index. It then reads the index
// back (Verify) and returns its reference by digest.
func Push(ctx context.Context, idx v1.ImageIndex, tag name.Tag, o PushOptions) (name.Digest, error) {
	opts := o.remote(ctx)
	if o.Progress != nil {
		updates := make(chan v1.Update, 16)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for u := range updates { // remote closes it when the write ends
				if u.Error == nil {
					o.Progress(u.Complete, u.Total)
				}
			}
		}()
		defer func() { <-done }()
		opts = append(opts, remote.WithProgress(updates))
	}
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return name.Digest{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	return Verify(ctx, idx, tag, o)
}
