package gcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/modelgate/modelgate/loader"
)

// readOnlyScope is the only scope the loader asks for.
const readOnlyScope = "https://www.googleapis.com/auth/devstorage.read_only"

// metadataIP is the GCE and GKE metadata server.
const metadataIP = "169.254.169.254"

// credentials say how requests are authorized.
type credentials struct {
	// ts gives access tokens; nil sends requests without credentials.
	ts oauth2.TokenSource
	// desc names the kind and origin, never the secret, for messages.
	desc string
}

// authEnv is what finding credentials reads besides the environment.
type authEnv struct {
	getenv func(string) string
	// client makes the token requests of credentials files.
	client *http.Client
	// metadataHost is probed when no file holds credentials.
	metadataHost string
	// probeTimeout bounds the probe, so that a cluster outside Google
	// Cloud does not wait for a metadata server that never answers.
	probeTimeout time.Duration
}

// credentialKinds are the credentials file types accepted, as messages
// name them.
var credentialKinds = map[string]string{
	string(google.ServiceAccount):                "service account key",
	string(google.AuthorizedUser):                "gcloud user credentials",
	string(google.ExternalAccount):               "workload identity federation credentials",
	string(google.ExternalAccountAuthorizedUser): "workforce identity federation user credentials",
	string(google.ImpersonatedServiceAccount):    "impersonated service account credentials",
}

// EnvCredentialsJSON holds the content of a credentials file (a service
// account key, ...), where GOOGLE_APPLICATION_CREDENTIALS holds its path:
// what a Secret's key gives the loader without a volume.
const EnvCredentialsJSON = "GOOGLE_APPLICATION_CREDENTIALS_JSON" //nolint:gosec // a variable name, not a credential

// CredentialsJSONVars are the variables a credentials file's content is
// read from, in order: EnvCredentialsJSON, then the keys Secrets commonly
// hold a service account key under (the name of the file it was created
// from; KServe's), which envFrom turns into variables of the same name
// (a variable name may hold dots).
var CredentialsJSONVars = []string{
	EnvCredentialsJSON,
	"key.json", "credentials.json", "service-account.json", "sa.json", "gcloud-application-credentials.json",
}

// findCredentials follows Application Default Credentials, reading the
// environment through e.getenv: GCS_NO_AUTH=true means none; then the file
// named by GOOGLE_APPLICATION_CREDENTIALS; the content of one in the first
// of CredentialsJSONVars that is set; gcloud's application default
// credentials file; the metadata server (GCE_METADATA_HOST, or the one at
// 169.254.169.254 when it answers in time); else none, for public buckets.
func findCredentials(ctx context.Context, e authEnv) (credentials, error) {
	if v := e.getenv("GCS_NO_AUTH"); v != "" {
		no, err := strconv.ParseBool(v)
		if err != nil {
			return credentials{}, fmt.Errorf("GCS_NO_AUTH=%q must be true or false: %w", v, loader.ErrInvalid)
		}
		if no {
			return credentials{desc: "no credentials (GCS_NO_AUTH=true)"}, nil
		}
	}
	// Token requests outlive New's context: they happen whenever a token
	// expires.
	tctx := context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, e.client)
	if p := e.getenv("GOOGLE_APPLICATION_CREDENTIALS"); p != "" {
		b, err := os.ReadFile(p) //nolint:gosec // the operator names the file (GOOGLE_APPLICATION_CREDENTIALS)
		if err != nil {
			return credentials{}, fmt.Errorf("GOOGLE_APPLICATION_CREDENTIALS=%s: %w: %w", p, err, loader.ErrInvalid)
		}
		return fromJSON(tctx, b, "from GOOGLE_APPLICATION_CREDENTIALS="+p)
	}
	for _, v := range CredentialsJSONVars {
		// The content itself is never quoted, in messages or anywhere.
		if content := e.getenv(v); strings.TrimSpace(content) != "" {
			return fromJSON(tctx, []byte(content), "from the variable "+v)
		}
	}
	if p := gcloudFile(e.getenv); p != "" {
		// As the oauth2 library does: a file that cannot be read is not
		// there.
		if b, err := os.ReadFile(p); err == nil { //nolint:gosec // gcloud's well-known file, as the oauth2 library reads it
			return fromJSON(tctx, b, "from "+p)
		}
	}
	host, probed := e.getenv("GCE_METADATA_HOST"), false
	if host == "" {
		host, probed = e.metadataHost, true
	}
	if !probed || onGCE(ctx, host, e.probeTimeout) {
		src := &metadataSource{host: host, client: metadataClient()}
		return credentials{
			// Refresh early, as the oauth2 library does: the metadata
			// server caches tokens for at least four minutes.
			ts:   oauth2.ReuseTokenSourceWithExpiry(nil, src, 225*time.Second),
			desc: "the service account of the metadata server at " + host,
		}, nil
	}
	return credentials{desc: "no credentials (none found: GOOGLE_APPLICATION_CREDENTIALS and " + EnvCredentialsJSON + " are unset, " +
		"no gcloud application default credentials, no metadata server answered)"}, nil
}

// fromJSON reads a credentials file of one of the accepted kinds.
func fromJSON(ctx context.Context, b []byte, origin string) (credentials, error) {
	var f struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return credentials{}, fmt.Errorf("credentials %s are not JSON: %w", origin, loader.ErrInvalid)
	}
	kind, ok := credentialKinds[f.Type]
	if !ok {
		return credentials{}, fmt.Errorf("credentials %s have type %q, not one of service_account, authorized_user, "+
			"external_account, external_account_authorized_user, impersonated_service_account: %w", origin, f.Type, loader.ErrInvalid)
	}
	c, err := google.CredentialsFromJSONWithTypeAndParams(ctx, b, google.CredentialsType(f.Type),
		google.CredentialsParams{Scopes: []string{readOnlyScope}})
	if err != nil {
		return credentials{}, fmt.Errorf("%s %s: %w: %w", kind, origin, err, loader.ErrInvalid)
	}
	return credentials{ts: c.TokenSource, desc: kind + " " + origin}, nil
}

// gcloudFile is where `gcloud auth application-default login` writes.
func gcloudFile(getenv func(string) string) string {
	const name = "application_default_credentials.json"
	if d := getenv("CLOUDSDK_CONFIG"); d != "" {
		return filepath.Join(d, name)
	}
	if runtime.GOOS == "windows" {
		if d := getenv("APPDATA"); d != "" {
			return filepath.Join(d, "gcloud", name)
		}
		return ""
	}
	if d := getenv("HOME"); d != "" {
		return filepath.Join(d, ".config", "gcloud", name)
	}
	return ""
}

// metadataClient talks to the metadata server directly, never through a
// proxy.
func metadataClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			ResponseHeaderTimeout: 10 * time.Second,
		},
		Timeout: 30 * time.Second,
	}
}

// onGCE reports whether a metadata server answers at host within timeout.
func onGCE(ctx context.Context, host string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
	if err != nil {
		return false
	}
	resp, err := metadataClient().Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return resp.Header.Get("Metadata-Flavor") == "Google"
}

// metadataSource gets the default service account's token from the
// metadata server: the node's on GCE, the Kubernetes service account's
// with GKE Workload Identity.
type metadataSource struct {
	host   string
	client *http.Client
}

// Token implements oauth2.TokenSource.
func (m *metadataSource) Token() (*oauth2.Token, error) {
	u := "http://" + m.host + "/computeMetadata/v1/instance/service-accounts/default/token?" +
		url.Values{"scopes": {readOnlyScope}}.Encode()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &oauth2.RetrieveError{Response: resp, Body: body}
	}
	var t struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return nil, errors.New("the metadata server answered without an access token")
	}
	tok := &oauth2.Token{AccessToken: t.AccessToken, TokenType: t.TokenType}
	if t.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return tok, nil
}

// authorize sets req's Authorization header, unless there are no
// credentials.
func (c credentials) authorize(req *http.Request) error {
	if c.ts == nil {
		return nil
	}
	tok, err := c.ts.Token()
	if err != nil {
		return c.tokenError(err)
	}
	tok.SetAuthHeader(req)
	return nil
}

// tokenError says why no token came: a token endpoint's 408, 429 or 5xx,
// or a network failure, is Transient; anything else is ErrAccessDenied.
// Token endpoints' bodies are not quoted, only their OAuth error codes.
func (c credentials) tokenError(err error) error {
	what := "getting an access token for " + c.desc
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := 0
		var h http.Header
		if re.Response != nil {
			code, h = re.Response.StatusCode, re.Response.Header
		}
		msg := fmt.Sprintf("%s: HTTP %d", what, code)
		if c, d := oauthError(re); c != "" {
			msg += ": " + c
			if d != "" {
				msg += ": " + d
			}
		}
		if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500 {
			return loader.Retryable(errors.New(msg), loader.RetryAfter(h, time.Now()))
		}
		return fmt.Errorf("%s: %w", msg, loader.ErrAccessDenied)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return loader.Retryable(fmt.Errorf("%s: %w", what, err), 0)
	}
	return fmt.Errorf("%s: %w: %w", what, err, loader.ErrAccessDenied)
}

// oauthError is RFC 6749's error and error_description of a failed token
// request, read from the body when the flow did not parse them (the JWT
// flow does not), on one line and cut short.
func oauthError(re *oauth2.RetrieveError) (code, desc string) {
	code, desc = re.ErrorCode, re.ErrorDescription
	if code == "" {
		var e struct {
			Code string `json:"error"`
			Desc string `json:"error_description"`
		}
		if json.Unmarshal(re.Body, &e) == nil {
			code, desc = e.Code, e.Desc
		}
	}
	return oneLine(code, 100), oneLine(desc, 300)
}
