package oci

import (
	_ "crypto/sha256" // digests of manifests and blobs
	_ "crypto/sha512"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/modelgate/modelgate/loader"
)

// DefaultTag is the tag resolved when the URI names neither a tag nor a
// digest.
const DefaultTag = "latest"

// Config is one model in an OCI registry.
type Config struct {
	// Registry is the registry's host, with its port when not the default.
	Registry string
	// Repository is the repository in the registry ("org/model").
	Repository string
	// Tag is resolved when Digest is empty; DefaultTag when both are.
	Tag string
	// Digest ("sha256:...") pins the manifest; it wins over Tag.
	Digest string
	// Getenv reads the environment (credentials, OCI_INSECURE); nil is
	// os.Getenv.
	Getenv func(string) string
	// HTTP is the base client (from loader.NewHTTPClient); nil builds one
	// with default options.
	HTTP *http.Client
	// PlainHTTP talks http:// to the registry instead of https://. It is
	// also set by OCI_INSECURE=true in the environment, for an in-cluster
	// registry without TLS; TLS verification itself is never turned off
	// (give a private CA to loader.NewHTTPClient instead).
	PlainHTTP bool
}

// Environment variables Source reads. Credentials are the first of:
// OCI_USERNAME and OCI_PASSWORD, OCI_TOKEN, DOCKER_CONFIG, none.
const (
	// EnvUsername and EnvPassword are basic credentials, sent to the
	// registry or exchanged at its token endpoint.
	EnvUsername = "OCI_USERNAME"
	EnvPassword = "OCI_PASSWORD"
	// EnvToken is a registry bearer token, sent as is.
	EnvToken = "OCI_TOKEN"
	// EnvDockerConfig is a directory holding a docker config.json (or a
	// mounted kubernetes.io/dockerconfigjson Secret's .dockerconfigjson);
	// its auths, credHelpers and credsStore are honoured.
	EnvDockerConfig = "DOCKER_CONFIG"
	// EnvInsecure=true speaks plain HTTP to the registry (PlainHTTP).
	EnvInsecure = "OCI_INSECURE"
)

// Source lists and reads one model in an OCI registry.
type Source struct {
	ref       registry.Reference // Reference is the tag or digest to resolve
	plainHTTP bool
	client    *auth.Client
	creds     *credSource
}

var _ loader.Source = (*Source)(nil)

// New checks c and returns its Source. Credentials are read from the
// environment now; a docker config's entry is read when the registry asks.
func New(c Config) (*Source, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	ref, err := c.reference()
	if err != nil {
		return nil, err
	}
	plain := c.PlainHTTP
	if v := getenv(EnvInsecure); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q must be true or false: %w", EnvInsecure, v, loader.ErrInvalid)
		}
		plain = plain || b
	}
	creds, err := newCredentials(getenv, ref.Host())
	if err != nil {
		return nil, err
	}
	base := c.HTTP
	if base == nil {
		if base, err = loader.NewHTTPClient(loader.HTTPOptions{}); err != nil {
			return nil, err
		}
	}
	return &Source{
		ref:       ref,
		plainHTTP: plain,
		client: &auth.Client{
			Client:     base,
			Credential: creds.get,
			Cache:      auth.NewCache(),
		},
		creds: creds,
	}, nil
}

// reference checks the registry, repository, tag and digest.
func (c Config) reference() (registry.Reference, error) {
	ref := registry.Reference{Registry: c.Registry, Repository: c.Repository}
	if c.Registry == "" {
		return ref, fmt.Errorf("oci: registry must not be empty: %w", loader.ErrInvalid)
	}
	if err := ref.ValidateRegistry(); err != nil {
		return ref, fmt.Errorf("oci: registry %q is not a host[:port]: %w", c.Registry, loader.ErrInvalid)
	}
	if err := ref.ValidateRepository(); err != nil {
		return ref, fmt.Errorf("oci: repository %q must be lower-case components separated by /: %w", c.Repository, loader.ErrInvalid)
	}
	switch {
	case c.Digest != "":
		d, err := digest.Parse(c.Digest)
		if err != nil {
			return ref, fmt.Errorf("oci: digest %q is not algorithm:hex (%w): %w", c.Digest, err, loader.ErrInvalid)
		}
		ref.Reference = d.String()
	case c.Tag != "":
		ref.Reference = c.Tag
		if err := ref.ValidateReferenceAsTag(); err != nil {
			return ref, fmt.Errorf("oci: tag %q must be up to 128 letters, digits, _, . and -: %w", c.Tag, loader.ErrInvalid)
		}
	default:
		ref.Reference = DefaultTag
	}
	return ref, nil
}

// String is the model's reference as the user wrote it, with the default
// tag filled in.
func (s *Source) String() string {
	sep := ":"
	if strings.Contains(s.ref.Reference, ":") {
		sep = "@"
	}
	return s.ref.Registry + "/" + s.ref.Repository + sep + s.ref.Reference
}

// baseURL is scheme://host/v2/repository.
func (s *Source) baseURL() string {
	scheme := "https"
	if s.plainHTTP {
		scheme = "http"
	}
	return scheme + "://" + s.ref.Host() + "/v2/" + s.ref.Repository
}
