// Package s3 is the loader.Source for s3://bucket/prefix: Amazon S3 and
// S3-compatible stores (MinIO, Ceph, R2, ...), configured from the standard
// AWS environment variables.
//
// The endpoint is AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else Amazon
// S3 in AWS_REGION (or AWS_DEFAULT_REGION). Credentials come from the first
// source the environment configures: static keys, a web identity token
// (IRSA), container credentials (EKS Pod Identity, ECS), the shared
// credentials file, instance metadata (IMDSv2); requests are anonymous when
// none is configured or AWS_NO_SIGN_REQUEST=true.
package s3

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/modelgate/modelgate/loader"
)

// defaultConns is the number of parallel requests when Config.Conns is 0.
const defaultConns = 8

// Config says which objects to load and how to reach them.
type Config struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix selects the objects, as an exact path prefix (see
	// loader.RelativeKey): "a/b" is the object "a/b" itself or everything
	// under "a/b/", never "a/bc". Empty is the whole bucket.
	Prefix string
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
	// CABundle is a PEM file of CA certificates trusted besides the
	// system's.
	CABundle string
	// Conns is the number of parallel requests (and connections kept);
	// 0 is 8.
	Conns int
}

// Source lists and reads the objects under one bucket and prefix.
type Source struct {
	bucket, prefix string
	conns          int
	core           minio.Core
	// creds says where the credentials came from, for error messages;
	// it never holds a secret.
	creds string
}

var _ loader.Source = (*Source)(nil)

// New returns the Source for c, with the endpoint and credentials the
// environment configures. It probes instance metadata (briefly) only when
// no other credential source is configured.
func New(ctx context.Context, c Config) (*Source, error) {
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := s3utils.CheckValidBucketName(c.Bucket); err != nil {
		return nil, fmt.Errorf("bucket %q: %w: %w", c.Bucket, err, loader.ErrInvalid)
	}
	ep, err := resolveEndpoint(getenv)
	if err != nil {
		return nil, err
	}
	conns := cmp.Or(max(c.Conns, 0), defaultConns)
	hc, err := loader.NewHTTPClient(loader.HTTPOptions{CABundle: c.CABundle, Conns: conns})
	if err != nil {
		return nil, err
	}
	plan, err := chooseCredentials(getenv, fileExists)
	if err != nil {
		return nil, err
	}
	creds, desc := plan.credentials(ctx, hc)
	client, err := minio.New(ep.Host, &minio.Options{
		Creds:        creds,
		Secure:       ep.Secure,
		Transport:    recordRetryAfter{hc.Transport},
		Region:       ep.Region,
		BucketLookup: ep.Lookup,
		// One request per call: the loader retries, with its own backoff
		// and deadline.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %q: %w: %w", ep.Host, err, loader.ErrInvalid)
	}
	client.SetS3EnableDualstack(ep.Dualstack)
	return &Source{
		bucket: c.Bucket,
		prefix: c.Prefix,
		conns:  conns,
		core:   minio.Core{Client: client},
		creds:  desc,
	}, nil
}

// endpoint is where the bucket is served.
type endpoint struct {
	// Host is host[:port].
	Host string
	// Secure is HTTPS; an http:// endpoint is plain HTTP.
	Secure bool
	// Region signs requests; empty lets the client ask the bucket's
	// location (Amazon S3 only).
	Region string
	// Lookup is path-style or automatic (virtual hosts on Amazon S3).
	Lookup    minio.BucketLookupType
	Dualstack bool
}

// resolveEndpoint reads the endpoint, region and addressing style from the
// environment.
func resolveEndpoint(getenv func(string) string) (endpoint, error) {
	ep := endpoint{
		Host:      "s3.amazonaws.com",
		Secure:    true,
		Region:    cmp.Or(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")),
		Dualstack: isTrue(getenv("AWS_USE_DUALSTACK_ENDPOINT")),
	}
	if isTrue(getenv("AWS_S3_FORCE_PATH_STYLE")) {
		ep.Lookup = minio.BucketLookupPath
	}
	name := "AWS_ENDPOINT_URL_S3"
	raw := getenv(name)
	if raw == "" {
		name = "AWS_ENDPOINT_URL"
		raw = getenv(name)
	}
	if raw == "" {
		return ep, nil
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return ep, fmt.Errorf("%s: %w", name, loader.ErrInvalid)
	case u.Scheme != "http" && u.Scheme != "https":
		return ep, fmt.Errorf("%s must be an http:// or https:// URL, not %s://: %w", name, u.Scheme, loader.ErrInvalid)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return ep, fmt.Errorf("%s must be a scheme and host[:port] only, like https://s3.example.com: %w", name, loader.ErrInvalid)
	}
	ep.Host, ep.Secure = u.Host, u.Scheme == "https"
	if ep.Region == "" && !s3utils.IsAmazonEndpoint(*u) {
		// S3-compatible stores accept the default region; asking the
		// bucket's location first would cost a request and a permission.
		ep.Region = "us-east-1"
	}
	return ep, nil
}

// isTrue reads a boolean environment variable as the AWS tools do.
func isTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// fileExists reports whether a regular file is at name.
func fileExists(name string) bool {
	fi, err := os.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}

// url names an object (or the prefix, key "") as the user would write it.
func (s *Source) url(key string) string {
	if key == "" {
		key = s.prefix
	}
	return "s3://" + s.bucket + "/" + key
}

// anonymous is the credentials of unsigned requests.
func anonymous() *credentials.Credentials {
	return credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
}
