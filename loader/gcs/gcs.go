// Package gcs is the loader.Source for gs://bucket/prefix: the objects
// under a prefix of a Google Cloud Storage bucket, listed and read over
// the GCS JSON API with plain net/http.
//
// Credentials are Application Default Credentials, looked up in order:
// the file named by GOOGLE_APPLICATION_CREDENTIALS (a service account key,
// workload identity federation, ...), the content of such a file in
// GOOGLE_APPLICATION_CREDENTIALS_JSON (or in a variable named like a
// Secret's key holding one: key.json, credentials.json, ...; see
// CredentialsJSONVars), gcloud's application default credentials file ($CLOUDSDK_CONFIG or ~/.config/gcloud), then the
// metadata server (GCE, or GKE Workload Identity; GCE_METADATA_HOST
// overrides its address). With none of them the requests go without
// credentials, which public buckets accept. GCS_NO_AUTH=true skips the
// search and always reads anonymously. STORAGE_EMULATOR_HOST (host:port or
// a URL) sends every request to an emulator, without credentials.
package gcs

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelgate/modelgate/loader"
)

// DefaultEndpoint is the GCS JSON API.
const DefaultEndpoint = "https://storage.googleapis.com"

// Config is one gs:// model.
type Config struct {
	// Bucket is the bucket's name.
	Bucket string
	// Prefix selects the objects: Prefix itself and the objects below
	// "Prefix/" ("" for the whole bucket).
	Prefix string
	// Getenv reads the environment; nil is os.Getenv.
	Getenv func(string) string
	// HTTP is the base client, from loader.NewHTTPClient; nil is one
	// with the defaults.
	HTTP *http.Client
	// PageSize is the number of objects asked for per listing page
	// (maxResults); 0 leaves the server's default, 1000.
	PageSize int
}

// Source lists and reads the objects of one bucket and prefix.
type Source struct {
	bucket, prefix string
	endpoint       string
	client         *http.Client
	creds          credentials
	pageSize       int
}

var _ loader.Source = (*Source)(nil)

// settings are what tests change besides Config.
type settings struct {
	// endpoint, when set, replaces the resolved one but keeps the
	// credentials.
	endpoint     string
	metadataHost string
	probeTimeout time.Duration
}

// New checks c and finds the endpoint and credentials. It makes no
// request to GCS, but may probe for a metadata server, for at most 3s.
func New(ctx context.Context, c Config) (*Source, error) {
	return newSource(ctx, c, settings{metadataHost: metadataIP, probeTimeout: 3 * time.Second})
}

func newSource(ctx context.Context, c Config, st settings) (*Source, error) {
	if err := checkBucket(c.Bucket); err != nil {
		return nil, err
	}
	if !utf8.ValidString(c.Prefix) || strings.ContainsAny(c.Prefix, "\r\n") {
		return nil, fmt.Errorf("prefix %q of gs://%s must be valid UTF-8 without line breaks: %w", c.Prefix, c.Bucket, loader.ErrInvalid)
	}
	if c.PageSize < 0 {
		return nil, fmt.Errorf("page size %d must not be negative: %w", c.PageSize, loader.ErrInvalid)
	}
	getenv := c.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	base := c.HTTP
	if base == nil {
		var err error
		if base, err = loader.NewHTTPClient(loader.HTTPOptions{}); err != nil {
			return nil, err
		}
	}
	// The GCS JSON API does not redirect; a redirect is answered as it
	// is, so that no token follows it.
	client := *base
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	s := &Source{bucket: c.Bucket, prefix: c.Prefix, client: &client, pageSize: c.PageSize}

	emulator, err := emulatorEndpoint(getenv("STORAGE_EMULATOR_HOST"))
	switch {
	case err != nil:
		return nil, err
	case st.endpoint != "":
		s.endpoint = st.endpoint
	case emulator != "":
		s.endpoint = emulator
		s.creds = credentials{desc: "no credentials (STORAGE_EMULATOR_HOST is set)"}
		return s, nil
	default:
		s.endpoint = DefaultEndpoint
	}
	s.creds, err = findCredentials(ctx, authEnv{getenv: getenv, client: base, metadataHost: st.metadataHost, probeTimeout: st.probeTimeout})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// emulatorEndpoint reads STORAGE_EMULATOR_HOST as the Go and Python
// clients do: host:port (plain http) or a URL.
func emulatorEndpoint(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	raw := v
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("STORAGE_EMULATOR_HOST=%q must be host:port or an http(s) URL: %w", v, loader.ErrInvalid)
	}
	return u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/"), nil
}

// checkBucket applies GCS's bucket naming rules.
func checkBucket(b string) error {
	bad := func(rule string) error {
		return fmt.Errorf("bucket %q %s: %w", b, rule, loader.ErrInvalid)
	}
	if len(b) < 3 || len(b) > 222 {
		return bad("must be 3 to 222 characters long")
	}
	for _, r := range b {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.' {
			return bad("may hold only lower-case letters, digits, '-', '_' and '.'")
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return bad("must start and end with a letter or digit")
	}
	for part := range strings.SplitSeq(b, ".") {
		if part == "" || len(part) > 63 {
			return bad("must have dot-separated parts of 1 to 63 characters")
		}
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// uri is what the user wrote, for messages.
func (s *Source) uri(name string) string { return "gs://" + s.bucket + "/" + name }

// get sends an authorized GET.
func (s *Source) get(ctx context.Context, u, what string, h http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", what, err, loader.ErrInvalid)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if err := s.creds.authorize(req); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return nil, loader.Retryable(fmt.Errorf("%s: %w", what, err), 0)
	}
	return resp, nil
}

// check is loader.CheckStatus, adding the credentials used to a 401 or
// 403 and the message of GCS's JSON error (never a token) to any failure.
func (s *Source) check(resp *http.Response, what string) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = http.NoBody
	err := loader.CheckStatus(resp, what)
	var notes []string
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		notes = append(notes, "sent with "+s.creds.desc)
	}
	if m := apiMessage(body); m != "" {
		notes = append(notes, "GCS says: "+m)
	}
	if len(notes) > 0 {
		err = fmt.Errorf("%w (%s)", err, strings.Join(notes, "; "))
	}
	return err
}

// apiMessage is error.message of a JSON API error, on one line and cut
// short.
func apiMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return oneLine(e.Error.Message, 300)
}

// oneLine replaces control characters in s by spaces and cuts it after
// limit runes.
func oneLine(s string, limit int) string {
	s = strings.TrimSpace(strings.Join(strings.FieldsFunc(s, unicode.IsControl), " "))
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "..."
	}
	return s
}

// object is one item of a listing, in the fields List asks for.
type object struct {
	Name       string `json:"name"`
	Size       int64  `json:"size,string"`
	Generation string `json:"generation"`
	MD5Hash    string `json:"md5Hash"`
	CRC32C     string `json:"crc32c"`
}

type page struct {
	Items         []object `json:"items"`
	NextPageToken string   `json:"nextPageToken"`
}

// List lists the objects under the prefix, following every page.
func (s *Source) List(ctx context.Context) (*loader.Listing, error) {
	what := "listing " + s.uri(s.prefix)
	var (
		files   []loader.File
		keyOf   = map[string]string{}
		sibling string // a name that only begins with the prefix
		token   string
	)
	for {
		p, err := s.page(ctx, token, what)
		if err != nil {
			return nil, err
		}
		for _, o := range p.Items {
			if o.Size == 0 && strings.HasSuffix(o.Name, "/") {
				continue // a folder placeholder
			}
			rel, ok := loader.RelativeKey(s.prefix, o.Name)
			if !ok {
				if sibling == "" {
					sibling = o.Name
				}
				continue
			}
			if k, dup := keyOf[rel]; dup {
				return nil, fmt.Errorf("%s: objects %q and %q both map to %q: %w", what, k, o.Name, rel, loader.ErrInvalid)
			}
			keyOf[rel] = o.Name
			ds, err := digests(o)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			files = append(files, loader.File{Path: rel, Size: o.Size, Digests: ds, Version: o.Generation, Key: o.Name})
		}
		if p.NextPageToken == "" {
			break
		}
		if p.NextPageToken == token {
			return nil, fmt.Errorf("%s: the server repeated page token %q", what, token)
		}
		token = p.NextPageToken
	}
	if len(files) == 0 {
		err := fmt.Errorf("no objects at %s: %w", s.uri(s.prefix), loader.ErrNotFound)
		if sibling != "" {
			err = fmt.Errorf("%w (the prefix matches whole path segments only: %q is not under it)", err, sibling)
		}
		return nil, err
	}
	return &loader.Listing{Files: files}, nil
}

// page gets one page of the listing.
func (s *Source) page(ctx context.Context, token, what string) (*page, error) {
	q := url.Values{"fields": {"items(name,size,generation,md5Hash,crc32c),nextPageToken"}}
	if s.prefix != "" {
		q.Set("prefix", s.prefix)
	}
	if token != "" {
		q.Set("pageToken", token)
	}
	if s.pageSize > 0 {
		q.Set("maxResults", strconv.Itoa(s.pageSize))
	}
	u := s.endpoint + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o?" + q.Encode()
	resp, err := s.get(ctx, u, what, nil)
	if err != nil {
		return nil, err
	}
	if err := s.check(resp, what); err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var p page
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&p); err != nil {
		err = fmt.Errorf("%s: reading the answer: %w", what, err)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, loader.Retryable(err, 0)
		}
		return nil, err
	}
	return &p, nil
}

// digests turns GCS's base64 md5Hash (absent for composite objects) and
// crc32c (4 bytes, big-endian) into hex.
func digests(o object) ([]loader.Digest, error) {
	var ds []loader.Digest
	for _, h := range []struct {
		alg  loader.Algorithm
		b64  string
		size int
	}{{loader.MD5, o.MD5Hash, 16}, {loader.CRC32C, o.CRC32C, 4}} {
		if h.b64 == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(h.b64)
		if err != nil || len(b) != h.size {
			return nil, fmt.Errorf("object %q has %s %q, not base64 of %d bytes: %w", o.Name, h.alg, h.b64, h.size, loader.ErrVerification)
		}
		ds = append(ds, loader.Digest{Algorithm: h.alg, Hex: hex.EncodeToString(b)})
	}
	return ds, nil
}

// Open reads [off, off+n) of the generation of f that List saw; when the
// object was replaced since, it fails with ErrVerification. Objects stored
// gzip-compressed are read as stored (the bytes their size and digests
// are of), never decompressed.
func (s *Source) Open(ctx context.Context, f *loader.File, off, n int64) (io.ReadCloser, error) {
	what := "reading " + s.uri(f.Key)
	if off < 0 || n <= 0 || off+n > f.Size {
		return nil, fmt.Errorf("%s: range %d+%d is outside its %d bytes: %w", what, off, n, f.Size, loader.ErrInvalid)
	}
	q := url.Values{"alt": {"media"}}
	if f.Version != "" {
		q.Set("ifGenerationMatch", f.Version)
	}
	u := s.endpoint + "/storage/v1/b/" + url.PathEscape(s.bucket) + "/o/" + url.PathEscape(f.Key) + "?" + q.Encode()
	resp, err := s.get(ctx, u, what, http.Header{
		"Range":           {fmt.Sprintf("bytes=%d-%d", off, off+n-1)},
		"Accept-Encoding": {"gzip"},
	})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusPreconditionFailed {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s: object changed during download (generation %s was replaced): %w", what, f.Version, loader.ErrVerification)
	}
	if err := s.check(resp, what); err != nil {
		return nil, err
	}
	served, stored := resp.Header.Get("Content-Encoding"), resp.Header.Get("X-Goog-Stored-Content-Encoding")
	if stored != "" && served != "" && served != stored {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s: served with Content-Encoding %q but stored as %q: %w", what, served, stored, loader.ErrVerification)
	}
	return loader.RangeBody(resp, off, n, f.Size)
}
