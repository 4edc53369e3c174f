package s3

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/modelgate/modelgate/loader"
)

// Bounds of the credential services' requests. The instance metadata
// token request is the probe: off AWS nothing answers it.
const (
	imdsTokenTimeout = time.Second
	imdsProbeTimeout = 3 * time.Second
	credTimeout      = 10 * time.Second
	imdsTokenTTL     = "21600"
)

// credentials returns the provider of p, and what to call it in
// messages. Instance metadata is probed here: when it gives no
// credentials, requests are anonymous.
func (p credPlan) credentials(ctx context.Context, hc *http.Client) (*credentials.Credentials, string) {
	desc := p.String()
	switch p.Kind {
	case credStatic:
		return credentials.NewStaticV4(p.AccessKeyID, p.SecretAccessKey, p.SessionToken), desc
	case credWebIdentity:
		file := p.TokenFile
		return credentials.New(checked{desc: desc, p: &credentials.STSWebIdentity{
			Client:      &http.Client{Transport: hc.Transport, Timeout: credTimeout},
			STSEndpoint: p.STSEndpoint,
			RoleARN:     p.RoleARN,
			GetWebIDTokenExpiry: func() (*credentials.WebIdentityToken, error) {
				b, err := os.ReadFile(file) //nolint:gosec // the operator's configuration names the file
				if err != nil {
					return nil, err
				}
				return &credentials.WebIdentityToken{Token: strings.TrimSpace(string(b))}, nil
			},
		}}), desc
	case credContainer:
		return credentials.New(checked{desc: desc, p: &containerProvider{
			uri: p.URI, token: p.AuthToken, tokenFile: p.AuthTokenFile, client: directClient(hc),
		}}), desc
	case credSharedFile:
		return credentials.New(checked{desc: desc, p: &credentials.FileAWSCredentials{Filename: p.File, Profile: p.Profile}}), desc
	case credIMDS:
		c := credentials.New(checked{desc: desc, p: &imdsProvider{endpoint: p.IMDSEndpoint, client: directClient(hc)}})
		pctx, cancel := context.WithTimeout(ctx, imdsProbeTimeout)
		defer cancel()
		if _, err := c.GetWithContext(&credentials.CredContext{Context: pctx}); err != nil {
			return anonymous(), credPlan{Kind: credAnonymous, Reason: "no credentials configured, and instance metadata gave none"}.String()
		}
		return c, desc
	default:
		return anonymous(), desc
	}
}

// checked wraps a provider: its failures name the source and wrap
// loader.ErrAccessDenied (or are Transient), and an empty key is a
// failure rather than a silent anonymous request.
type checked struct {
	desc string
	p    credentials.Provider
}

func (c checked) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	v, err := c.p.RetrieveWithCredContext(cc)
	if err != nil {
		return credentials.Value{}, credError(c.desc, err)
	}
	if v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return credentials.Value{}, fmt.Errorf("getting credentials (%s): no access key: %w", c.desc, loader.ErrAccessDenied)
	}
	v.SignerType = credentials.SignatureV4
	return v, nil
}

func (c checked) Retrieve() (credentials.Value, error) { return c.RetrieveWithCredContext(nil) }

func (c checked) IsExpired() bool { return c.p.IsExpired() }

// credError classifies a credential service's failure: throttling, 5xx
// and network failures are Transient, everything else is access denied.
func credError(desc string, err error) error {
	what := "getting credentials (" + desc + ")"
	var sts credentials.ErrorResponse
	switch {
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w", what, err)
	case errors.As(err, &sts):
		switch sts.STSError.Code {
		case "Throttling", "IDPCommunicationError", "InternalFailure", "ServiceUnavailable":
			return loader.Retryable(fmt.Errorf("%s: %s", what, sts.STSError.Code), 0)
		}
		return fmt.Errorf("%s: %s: %w", what, sts.STSError.Code, loader.ErrAccessDenied)
	}
	if _, ok := loader.IsTransient(err); ok || isNetError(err) {
		return loader.Retryable(fmt.Errorf("%s: %w", what, err), 0)
	}
	if errors.Is(err, loader.ErrAccessDenied) {
		return fmt.Errorf("%s: %w", what, err)
	}
	// The cause goes in as text only: a kind it carries (a 404 from the
	// credential service reads as ErrNotFound) must not outrank
	// ErrAccessDenied.
	return fmt.Errorf("%s: %s: %w", what, err.Error(), loader.ErrAccessDenied)
}

// roleCredentials is what the container and instance metadata services
// answer.
type roleCredentials struct {
	Code            string
	AccessKeyID     string `json:"AccessKeyId"`
	SecretAccessKey string
	Token           string
	Expiration      time.Time
}

func (r roleCredentials) value() credentials.Value {
	return credentials.Value{
		AccessKeyID: r.AccessKeyID, SecretAccessKey: r.SecretAccessKey, SessionToken: r.Token,
		Expiration: r.Expiration, SignerType: credentials.SignatureV4,
	}
}

// expiry is when to fetch credentials again: before they expire, or in an
// hour when the service did not say.
func (r roleCredentials) expiry() time.Time {
	if r.Expiration.IsZero() {
		return time.Now().Add(time.Hour)
	}
	return r.Expiration
}

// containerProvider fetches credentials from the ECS or EKS Pod Identity
// agent, re-reading the authorization token file each time (it rotates).
type containerProvider struct {
	credentials.Expiry
	uri, token, tokenFile string
	client                *http.Client
}

func (p *containerProvider) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	token := p.token
	if p.tokenFile != "" {
		b, err := os.ReadFile(p.tokenFile)
		if err != nil {
			return credentials.Value{}, fmt.Errorf("authorization token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	req, err := http.NewRequestWithContext(credContext(cc), http.MethodGet, p.uri, nil)
	if err != nil {
		return credentials.Value{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	var rc roleCredentials
	if err := getJSON(p.client, req, &rc); err != nil {
		return credentials.Value{}, err
	}
	p.SetExpiration(rc.expiry(), credentials.DefaultExpiryWindow)
	return rc.value(), nil
}

func (p *containerProvider) Retrieve() (credentials.Value, error) {
	return p.RetrieveWithCredContext(nil)
}

// imdsProvider fetches the instance role's credentials from the instance
// metadata service, IMDSv2 only (a session token first, with a short
// timeout: off AWS nothing answers).
type imdsProvider struct {
	credentials.Expiry
	endpoint string
	client   *http.Client
}

func (p *imdsProvider) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	ctx := credContext(cc)
	token, err := p.token(ctx)
	if err != nil {
		return credentials.Value{}, err
	}
	const base = "/latest/meta-data/iam/security-credentials/"
	var role string
	if err := p.get(ctx, token, base, func(r io.Reader) error {
		s := bufio.NewScanner(r)
		if s.Scan() {
			role = strings.TrimSpace(s.Text())
		}
		return s.Err()
	}); err != nil {
		return credentials.Value{}, err
	}
	if role == "" {
		return credentials.Value{}, errors.New("no IAM role attached to the instance")
	}
	var rc roleCredentials
	if err := p.get(ctx, token, base+role, func(r io.Reader) error { return json.NewDecoder(r).Decode(&rc) }); err != nil {
		return credentials.Value{}, err
	}
	if rc.Code != "" && rc.Code != "Success" {
		return credentials.Value{}, fmt.Errorf("instance metadata answered %s", rc.Code)
	}
	p.SetExpiration(rc.expiry(), credentials.DefaultExpiryWindow)
	return rc.value(), nil
}

func (p *imdsProvider) Retrieve() (credentials.Value, error) { return p.RetrieveWithCredContext(nil) }

// token asks for an IMDSv2 session token.
func (p *imdsProvider) token(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, imdsTokenTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.endpoint+"/latest/api/token", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", imdsTokenTTL)
	var token string
	err = do(p.client, req, "instance metadata token", func(r io.Reader) error {
		b, err := io.ReadAll(io.LimitReader(r, 4<<10))
		token = strings.TrimSpace(string(b))
		return err
	})
	return token, err
}

func (p *imdsProvider) get(ctx context.Context, token, path string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.endpoint+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-aws-ec2-metadata-token", token)
	return do(p.client, req, "instance metadata", read)
}

// getJSON sends req and decodes the JSON answer into v.
func getJSON(c *http.Client, req *http.Request, v any) error {
	return do(c, req, "credentials service", func(r io.Reader) error { return json.NewDecoder(r).Decode(v) })
}

// do sends req and hands a 200 answer's body (at most 1 MiB) to read.
// Messages name what, never the URL.
func do(c *http.Client, req *http.Request, what string, read func(io.Reader) error) error {
	resp, err := c.Do(req)
	if err != nil {
		return loader.Retryable(fmt.Errorf("%s: %w", what, errors.Unwrap(err)), 0)
	}
	defer resp.Body.Close()
	if err := loader.CheckStatus(resp, what); err != nil {
		return err
	}
	if err := read(io.LimitReader(resp.Body, 1<<20)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// credContext is the caller's context a credential request runs under.
func credContext(cc *credentials.CredContext) context.Context {
	if cc == nil || cc.Context == nil {
		return context.Background()
	}
	return cc.Context
}

// directClient is hc without a proxy, for the link-local credential
// services, with an overall timeout.
func directClient(hc *http.Client) *http.Client {
	c := &http.Client{Timeout: credTimeout}
	if t, ok := hc.Transport.(*http.Transport); ok {
		t = t.Clone()
		t.Proxy = nil
		c.Transport = t
	}
	return c
}
