package gcs

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

const testToken = "ya29.test-access-token"

// tokenServer is an OAuth token endpoint. It accepts a service account's
// JWT assertion when it is signed by key and asks for the read-only
// scope, and a refresh token "refresh-me"; it answers every other request
// with status (400 when 0) and an OAuth error.
func tokenServer(t *testing.T, key *rsa.PrivateKey, status int) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Errorf("token request: %v", err)
		}
		ok := false
		switch r.PostForm.Get("grant_type") {
		case "urn:ietf:params:oauth:grant-type:jwt-bearer":
			ok = status == 0 && validAssertion(t, key, r.PostForm.Get("assertion"))
		case "refresh_token":
			ok = status == 0 && r.PostForm.Get("refresh_token") == "refresh-me"
		}
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(max(status, http.StatusBadRequest))
			_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"` + testToken + `","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(ts.Close)
	return ts
}

// validAssertion checks a JWT's RS256 signature and its scope claim.
func validAssertion(t *testing.T, key *rsa.PrivateKey, jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	h := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, h[:], sig) != nil {
		return false
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var c struct {
		Scope string `json:"scope"`
	}
	if json.Unmarshal(claims, &c) != nil || c.Scope != readOnlyScope {
		t.Errorf("the assertion asks for scope %q, want %q", c.Scope, readOnlyScope)
		return false
	}
	return true
}

// writeJSON writes v as JSON to dir/name and returns the path.
func writeJSON(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// readFile returns a file's content.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// serviceAccountKey writes a service account key file for key whose
// token_uri is tokenURL.
func serviceAccountKey(t *testing.T, key *rsa.PrivateKey, tokenURL string) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writeJSON(t, filepath.Join(t.TempDir(), "key.json"), map[string]string{
		"type":           "service_account",
		"project_id":     "modelgate-test",
		"private_key_id": "key-1",
		"private_key":    string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":   "loader@modelgate-test.iam.gserviceaccount.com",
		"token_uri":      tokenURL,
	})
}

// metadataServer is a GCE/GKE metadata server handing out testToken.
func metadataServer(t *testing.T, flavor bool) (host string, tokens *atomic.Int32) {
	t.Helper()
	tokens = new(atomic.Int32)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if flavor {
			w.Header().Set("Metadata-Flavor", "Google")
		}
		switch {
		case r.URL.Path == "/":
			_, _ = w.Write([]byte("computeMetadata/\n"))
		case r.URL.Path == "/computeMetadata/v1/instance/service-accounts/default/token" &&
			r.Header.Get("Metadata-Flavor") == "Google" && r.URL.Query().Get("scopes") == readOnlyScope:
			tokens.Add(1)
			_, _ = w.Write([]byte(`{"access_token":"` + testToken + `","expires_in":3599,"token_type":"Bearer"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://"), tokens
}

// silentHost accepts connections and never answers.
func silentHost(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return l.Addr().String()
}

func TestCredentials(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tokens := tokenServer(t, key, 0)
	keyFile := serviceAccountKey(t, key, tokens.URL)
	home := t.TempDir()
	writeJSON(t, filepath.Join(home, ".config", "gcloud", "application_default_credentials.json"), map[string]string{
		"type": "authorized_user", "client_id": "id", "client_secret": "secret",
		"refresh_token": "refresh-me", "token_uri": tokens.URL,
	})
	metaHost, _ := metadataServer(t, true)
	plainHost, _ := metadataServer(t, false)
	bearer := "Bearer " + testToken
	keyJSON := readFile(t, keyFile)
	for _, tc := range []struct {
		name     string
		env      map[string]string
		metadata string // the probed metadata server
		want     string // the Authorization header sent
		wantDesc string
	}{{
		name:     "service account key from GOOGLE_APPLICATION_CREDENTIALS",
		env:      map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": keyFile, "HOME": home, "GCE_METADATA_HOST": metaHost},
		want:     bearer,
		wantDesc: "service account key from GOOGLE_APPLICATION_CREDENTIALS=" + keyFile,
	}, {
		name:     "service account key in GOOGLE_APPLICATION_CREDENTIALS_JSON, before gcloud's file",
		env:      map[string]string{"GOOGLE_APPLICATION_CREDENTIALS_JSON": keyJSON, "key.json": "{}", "HOME": home, "GCE_METADATA_HOST": metaHost},
		want:     bearer,
		wantDesc: "service account key from the variable GOOGLE_APPLICATION_CREDENTIALS_JSON",
	}, {
		name:     "a Secret's key.json, given whole",
		env:      map[string]string{"key.json": keyJSON, "HOME": home},
		want:     bearer,
		wantDesc: "service account key from the variable key.json",
	}, {
		name:     "a Secret's gcloud-application-credentials.json (KServe's)",
		env:      map[string]string{"gcloud-application-credentials.json": keyJSON},
		want:     bearer,
		wantDesc: "service account key from the variable gcloud-application-credentials.json",
	}, {
		name:     "the file before the content",
		env:      map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": keyFile, "GOOGLE_APPLICATION_CREDENTIALS_JSON": "not json"},
		want:     bearer,
		wantDesc: "service account key from GOOGLE_APPLICATION_CREDENTIALS=" + keyFile,
	}, {
		name:     "gcloud application default credentials",
		env:      map[string]string{"HOME": home, "GCE_METADATA_HOST": metaHost},
		want:     bearer,
		wantDesc: "gcloud user credentials from " + filepath.Join(home, ".config/gcloud/application_default_credentials.json"),
	}, {
		name:     "CLOUDSDK_CONFIG before HOME",
		env:      map[string]string{"CLOUDSDK_CONFIG": filepath.Join(home, ".config", "gcloud"), "HOME": t.TempDir()},
		want:     bearer,
		wantDesc: "gcloud user credentials from " + filepath.Join(home, ".config/gcloud/application_default_credentials.json"),
	}, {
		name:     "metadata server from GCE_METADATA_HOST",
		env:      map[string]string{"GCE_METADATA_HOST": metaHost},
		want:     bearer,
		wantDesc: "the service account of the metadata server at " + metaHost,
	}, {
		name:     "metadata server found by the probe",
		metadata: metaHost,
		want:     bearer,
		wantDesc: "the service account of the metadata server at " + metaHost,
	}, {
		name:     "a server at the metadata address that is not one",
		metadata: plainHost,
		wantDesc: "no credentials (none found: GOOGLE_APPLICATION_CREDENTIALS and GOOGLE_APPLICATION_CREDENTIALS_JSON are unset, no gcloud application default credentials, no metadata server answered)",
	}, {
		name:     "no metadata server answers in time",
		metadata: silentHost(t),
		wantDesc: "no credentials (none found: GOOGLE_APPLICATION_CREDENTIALS and GOOGLE_APPLICATION_CREDENTIALS_JSON are unset, no gcloud application default credentials, no metadata server answered)",
	}, {
		name:     "GCS_NO_AUTH=true skips every credential",
		env:      map[string]string{"GCS_NO_AUTH": "true", "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent.json", "GCE_METADATA_HOST": metaHost},
		wantDesc: "no credentials (GCS_NO_AUTH=true)",
	}, {
		name:     "GCS_NO_AUTH=false searches",
		env:      map[string]string{"GCS_NO_AUTH": "false", "GCE_METADATA_HOST": metaHost},
		want:     bearer,
		wantDesc: "the service account of the metadata server at " + metaHost,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeGCS(t, stored("private", "m/a.bin", "weights"))
			metadata := tc.metadata
			if metadata == "" {
				metadata = silentHost(t)
			}
			s, err := newSource(t.Context(), Config{Bucket: "private", Prefix: "m", Getenv: env(tc.env)},
				settings{endpoint: f.url, metadataHost: metadata, probeTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if s.creds.desc != tc.wantDesc {
				t.Errorf("credentials: got %q, want %q", s.creds.desc, tc.wantDesc)
			}
			l, err := s.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readRange(t, s, &l.Files[0], 0, 3); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tc.want, tc.want}, f.authorizations()); diff != "" {
				t.Errorf("Authorization of the list and the read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmulatorSendsNoCredentials(t *testing.T) {
	metaHost, tokens := metadataServer(t, true)
	f := newFakeGCS(t, stored("models", "m/a.bin", "weights"))
	s, err := New(t.Context(), Config{Bucket: "models", Prefix: "m", Getenv: env(map[string]string{
		"STORAGE_EMULATOR_HOST": strings.TrimPrefix(f.url, "http://"), "GCE_METADATA_HOST": metaHost,
	})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{""}, f.authorizations()); diff != "" {
		t.Errorf("Authorization (-want +got):\n%s", diff)
	}
	if n := tokens.Load(); n != 0 {
		t.Errorf("%d tokens asked of the metadata server, want none", n)
	}
}

func TestTokenFailures(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		signer    *rsa.PrivateKey
		status    int
		transient bool
		wantMsg   string
	}{{
		name: "rejected key", signer: other, wantMsg: "HTTP 400: invalid_grant: Invalid JWT Signature.",
	}, {
		name: "token endpoint unavailable", signer: key, status: http.StatusServiceUnavailable, transient: true, wantMsg: "HTTP 503",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			keyFile := serviceAccountKey(t, tc.signer, tokenServer(t, key, tc.status).URL)
			f := newFakeGCS(t, stored("private", "m/a.bin", "weights"))
			s, err := newSource(t.Context(), Config{Bucket: "private", Prefix: "m",
				Getenv: env(map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": keyFile})}, settings{endpoint: f.url})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.List(t.Context())
			if _, transient := loader.IsTransient(err); transient != tc.transient || (!tc.transient && !errors.Is(err, loader.ErrAccessDenied)) {
				t.Fatalf("got %v, want transient %v or else ErrAccessDenied", err, tc.transient)
			}
			for _, m := range []string{"listing gs://private/m: getting an access token for service account key from GOOGLE_APPLICATION_CREDENTIALS=" + keyFile, tc.wantMsg} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
			if len(f.requests()) != 0 {
				t.Errorf("%d requests reached GCS without a token", len(f.requests()))
			}
		})
	}
}

func TestAccessDeniedNamesCredentialsNotToken(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := serviceAccountKey(t, key, tokenServer(t, key, 0).URL)
	f := newFakeGCS(t, stored("private", "m/a.bin", "weights"))
	f.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, `{"error":{"code":403,"message":"loader@modelgate-test.iam.gserviceaccount.com does not have storage.objects.list access."}}`, http.StatusForbidden)
		return true
	})
	s, err := newSource(t.Context(), Config{Bucket: "private", Prefix: "m",
		Getenv: env(map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": keyFile})}, settings{endpoint: f.url})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.List(t.Context())
	if !errors.Is(err, loader.ErrAccessDenied) {
		t.Fatalf("got %v, want ErrAccessDenied", err)
	}
	want := "listing gs://private/m: HTTP 403 Forbidden: access denied (sent with service account key from GOOGLE_APPLICATION_CREDENTIALS=" +
		keyFile + "; GCS says: loader@modelgate-test.iam.gserviceaccount.com does not have storage.objects.list access.)"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Bearer " + testToken}, f.authorizations()); diff != "" {
		t.Errorf("Authorization (-want +got):\n%s", diff)
	}
}

func TestNewInvalid(t *testing.T) {
	dir := t.TempDir()
	bogus := writeJSON(t, filepath.Join(dir, "bogus.json"), map[string]string{"type": "api_key"})
	notJSON := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(notJSON, []byte("-----BEGIN PRIVATE KEY-----"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bucket string
		env          map[string]string
		wantMsg      string
	}{
		{name: "bucket too short", bucket: "ab", wantMsg: `bucket "ab" must be 3 to 222 characters long`},
		{name: "bucket with upper case", bucket: "Models", wantMsg: `bucket "Models" may hold only`},
		{name: "bucket with a slash", bucket: "models/llama", wantMsg: `bucket "models/llama" may hold only`},
		{name: "bucket ending in a dash", bucket: "models-", wantMsg: "must start and end with a letter or digit"},
		{name: "bucket with an empty part", bucket: "models..x", wantMsg: "dot-separated parts"},
		{name: "GCS_NO_AUTH not a boolean", bucket: "models", env: map[string]string{"GCS_NO_AUTH": "yes please"},
			wantMsg: `GCS_NO_AUTH="yes please" must be true or false`},
		{name: "emulator host not a URL", bucket: "models", env: map[string]string{"STORAGE_EMULATOR_HOST": "ftp://emulator:21"},
			wantMsg: `STORAGE_EMULATOR_HOST="ftp://emulator:21" must be host:port or an http(s) URL`},
		{name: "missing credentials file", bucket: "models", env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": filepath.Join(dir, "none.json")},
			wantMsg: "GOOGLE_APPLICATION_CREDENTIALS=" + filepath.Join(dir, "none.json")},
		{name: "credentials of an unknown type", bucket: "models", env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": bogus},
			wantMsg: `have type "api_key"`},
		{name: "credentials not JSON", bucket: "models", env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": notJSON},
			wantMsg: "credentials from GOOGLE_APPLICATION_CREDENTIALS=" + notJSON + " are not JSON"},
		{name: "credentials content not JSON", bucket: "models", env: map[string]string{"GOOGLE_APPLICATION_CREDENTIALS_JSON": "hush-private-key"},
			wantMsg: "credentials from the variable GOOGLE_APPLICATION_CREDENTIALS_JSON are not JSON"},
		{name: "a Secret's credentials.json of an unknown type", bucket: "models", env: map[string]string{"credentials.json": `{"type":"api_key","key":"hush"}`},
			wantMsg: `credentials from the variable credentials.json have type "api_key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newSource(t.Context(), Config{Bucket: tc.bucket, Getenv: env(tc.env)},
				settings{metadataHost: silentHost(t), probeTimeout: 100 * time.Millisecond})
			if !errors.Is(err, loader.ErrInvalid) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("got %v, want ErrInvalid saying %q", err, tc.wantMsg)
			}
			if err != nil && strings.Contains(err.Error(), "hush") {
				t.Errorf("error %q shows a credential", err)
			}
		})
	}
}
