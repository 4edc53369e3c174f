package oci

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/modelgate/modelgate/loader"
)

// maxMetadataSize bounds a manifest, an index or a ModelKit config.
const maxMetadataSize = 4 << 20

// get sends a GET through the authenticating client, with a pull scope on
// the repository, and returns a 2xx answer; what names the thing asked for
// in errors.
func (s *Source) get(ctx context.Context, u string, h http.Header, what string) (*http.Response, error) {
	ctx = auth.AppendRepositoryScope(ctx, s.ref, auth.ActionPull)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, err, loader.ErrInvalid)
	}
	maps.Copy(req.Header, h)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.requestErr(err, what)
	}
	if err := loader.CheckStatus(resp, what); err != nil {
		if errors.Is(err, loader.ErrAccessDenied) {
			err = fmt.Errorf("%w (credentials: %s)", err, s.creds.describe())
		}
		return nil, err
	}
	return resp, nil
}

// requestErr classifies a failure to get an answer at all: a cut or
// refused connection is Transient, a certificate problem is not, and the
// rest comes from authenticating (a token endpoint's answer, a missing
// credential).
func (s *Source) requestErr(err error, what string) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var resp *errcode.ErrorResponse
	if errors.As(err, &resp) {
		// The token endpoint's answer.
		msg := http.StatusText(resp.StatusCode)
		if len(resp.Errors) > 0 {
			msg = resp.Errors.Error()
		}
		err := fmt.Errorf("%s: getting a token with %s: HTTP %d: %s", what, s.creds.describe(), resp.StatusCode, msg)
		switch code := resp.StatusCode; {
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return fmt.Errorf("%w: %w", err, loader.ErrAccessDenied)
		case code == http.StatusTooManyRequests || code >= 500:
			return loader.Retryable(err, 0)
		}
		return err
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		// Not uerr itself: its URL may be a signed blob-storage URL.
		var verr *tls.CertificateVerificationError
		var herr x509.HostnameError
		var aerr x509.UnknownAuthorityError
		if errors.As(err, &verr) || errors.As(err, &herr) || errors.As(err, &aerr) {
			return fmt.Errorf("%s: %w", what, uerr.Err)
		}
		return loader.Retryable(fmt.Errorf("%s: %w", what, uerr.Err), 0)
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return fmt.Errorf("%s: the registry asks for a user name and password (%s and %s, or %s) and none were found (credentials: %s): %w",
			what, EnvUsername, EnvPassword, EnvDockerConfig, s.creds.describe(), loader.ErrAccessDenied)
	}
	return fmt.Errorf("%s: authenticating with %s: %w: %w", what, s.creds.describe(), err, loader.ErrAccessDenied)
}

// readVerified reads a small body whole and checks it against want (when
// set) and the registry's Docker-Content-Digest (when of the same
// algorithm). It returns the body's digest in want's algorithm, else
// SHA-256.
func readVerified(resp *http.Response, want digest.Digest, what string) ([]byte, digest.Digest, error) {
	defer func() { _ = resp.Body.Close() }()
	if resp.ContentLength > maxMetadataSize {
		return nil, "", fmt.Errorf("%s: %d bytes is over the %d allowed: %w", what, resp.ContentLength, maxMetadataSize, loader.ErrInvalid)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataSize+1))
	if err != nil {
		return nil, "", loader.Retryable(fmt.Errorf("%s: reading: %w", what, err), 0)
	}
	if len(body) > maxMetadataSize {
		return nil, "", fmt.Errorf("%s: over the %d bytes allowed: %w", what, maxMetadataSize, loader.ErrInvalid)
	}
	alg := digest.Canonical
	if want != "" {
		alg = want.Algorithm()
	}
	got := alg.FromBytes(body)
	if want != "" && got != want {
		return nil, "", fmt.Errorf("%s: content has digest %s: %w", what, got, loader.ErrVerification)
	}
	if h, err := digest.Parse(resp.Header.Get("Docker-Content-Digest")); err == nil && h.Algorithm() == alg && h != got {
		return nil, "", fmt.Errorf("%s: registry says digest %s, content has %s: %w", what, h, got, loader.ErrVerification)
	}
	return body, got, nil
}
