package httpsrc

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

func TestNew(t *testing.T) {
	sum := sumHex([]byte("weights"))
	tests := map[string]struct {
		config   Config
		wantName string
		wantErr  bool
	}{
		"https":                   {config: Config{URL: "https://example.com/m/model.safetensors"}, wantName: "model.safetensors"},
		"plain http":              {config: Config{URL: "http://mirror.local:8080/model.gguf"}, wantName: "model.gguf"},
		"with sha256":             {config: Config{URL: "https://example.com/model.gguf", SHA256: sum}, wantName: "model.gguf"},
		"percent-encoded name":    {config: Config{URL: "https://example.com/a/my%20model.bin?sig=" + secret}, wantName: "my model.bin"},
		"signed query":            {config: Config{URL: "https://bucket.s3.amazonaws.com/k/w.bin?X-Amz-Signature=" + secret}, wantName: "w.bin"},
		"ftp":                     {config: Config{URL: "ftp://example.com/model.bin?sig=" + secret}, wantErr: true},
		"no host":                 {config: Config{URL: "https:///model.bin?sig=" + secret}, wantErr: true},
		"opaque":                  {config: Config{URL: "https:model.bin"}, wantErr: true},
		"fragment":                {config: Config{URL: "https://example.com/model.bin?sig=" + secret + "#sha256=" + sum}, wantErr: true},
		"directory":               {config: Config{URL: "https://example.com/models/?sig=" + secret}, wantErr: true},
		"dot dot":                 {config: Config{URL: "https://example.com/models/..?sig=" + secret}, wantErr: true},
		"encoded dot dot":         {config: Config{URL: "https://example.com/models/%2e%2e?sig=" + secret}, wantErr: true},
		"encoded slash":           {config: Config{URL: "https://example.com/models/a%2Fb?sig=" + secret}, wantErr: true},
		"reserved name":           {config: Config{URL: "https://example.com/.modelgate?sig=" + secret}, wantErr: true},
		"malformed":               {config: Config{URL: "https://exa mple.com/model.bin?sig=" + secret}, wantErr: true},
		"malformed with password": {config: Config{URL: "https://user:" + secret + "@exa mple.com/m.bin"}, wantErr: true},
		"upper-case sha256":       {config: Config{URL: "https://example.com/model.gguf", SHA256: strings.ToUpper(sum)}, wantErr: true},
		"short sha256":            {config: Config{URL: "https://example.com/model.gguf", SHA256: sum[:63]}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := New(tc.config)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("New succeeded, want an error")
				}
				if !errors.Is(err, loader.ErrInvalid) {
					t.Errorf("New error %q does not wrap ErrInvalid", err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("New error %q shows the URL's query or password", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if s.name != tc.wantName {
				t.Errorf("file name = %q, want %q", s.name, tc.wantName)
			}
		})
	}
}

func TestParseDigestFragment(t *testing.T) {
	sum := sumHex([]byte("weights"))
	tests := map[string]struct {
		fragment string
		want     string
		wantErr  bool
	}{
		"sha256":               {fragment: "sha256=" + sum, want: sum},
		"with #":               {fragment: "#sha256=" + sum, want: sum},
		"empty":                {fragment: "", want: ""},
		"63 digits":            {fragment: "sha256=" + sum[:63], wantErr: true},
		"65 digits":            {fragment: "sha256=" + sum + "0", wantErr: true},
		"upper-case digest":    {fragment: "sha256=" + strings.ToUpper(sum), wantErr: true},
		"upper-case algorithm": {fragment: "SHA256=" + sum, wantErr: true},
		"not hex":              {fragment: "sha256=" + strings.Repeat("g", 64), wantErr: true},
		"md5":                  {fragment: "md5=5eb63bbbe01eeed093cb22bb8f5acdc3", wantErr: true},
		"sha512":               {fragment: "sha512=" + sum + sum, wantErr: true},
		"sha-256":              {fragment: "sha-256=" + sum, wantErr: true},
		"no value":             {fragment: "sha256", wantErr: true},
		"empty value":          {fragment: "sha256=", wantErr: true},
		"extra parameter":      {fragment: "sha256=" + sum + "&egg=model", wantErr: true},
		"pip subdirectory":     {fragment: "subdirectory=x&sha256=" + sum, wantErr: true},
		"two digests":          {fragment: "sha256=" + sum + ",sha256=" + sum, wantErr: true},
		"spaces":               {fragment: "sha256= " + sum[1:], wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseDigestFragment(tc.fragment)
			if tc.wantErr {
				if err == nil || !errors.Is(err, loader.ErrInvalid) {
					t.Fatalf("ParseDigestFragment(%q) = %q, %v; want an ErrInvalid", tc.fragment, got, err)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatalf("ParseDigestFragment(%q): %v", tc.fragment, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseDigestFragment(%q) (-want +got):\n%s", tc.fragment, diff)
			}
		})
	}
}

// caBundle writes srv's certificate as a PEM file.
func caBundle(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTLS(t *testing.T) {
	data := testData(5000)
	fs := newFileServer(data)
	srv := httptest.NewTLSServer(fs)
	t.Cleanup(srv.Close)
	u := srv.URL + "/model.safetensors?sig=" + secret

	client, err := loader.NewHTTPClient(loader.HTTPOptions{CABundle: caBundle(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(Config{URL: u, SHA256: sumHex(data), HTTP: client})
	if err != nil {
		t.Fatal(err)
	}
	l, err := src.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got, err := read(src, &l.Files[0], 1000, 3000)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if diff := cmp.Diff(data[1000:4000], got); diff != "" {
		t.Errorf("bytes 1000-3999 (-want +got):\n%s", diff)
	}

	t.Run("unknown CA", func(t *testing.T) {
		src, err := New(Config{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.List(context.Background())
		if err == nil {
			t.Fatal("List trusted a certificate of an unknown CA")
		}
		if _, ok := loader.IsTransient(err); ok {
			t.Errorf("certificate failure %q is transient; retrying cannot help", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows the URL's query", err)
		}
	})

	t.Run("redirect to plain http", func(t *testing.T) {
		plain := httptest.NewServer(fs)
		t.Cleanup(plain.Close)
		redirect := httptest.NewTLSServer(http.RedirectHandler(plain.URL+"/model.safetensors?sig="+secret, http.StatusFound))
		t.Cleanup(redirect.Close)
		client, err := loader.NewHTTPClient(loader.HTTPOptions{CABundle: caBundle(t, redirect)})
		if err != nil {
			t.Fatal(err)
		}
		src, err := New(Config{URL: redirect.URL + "/model.safetensors", HTTP: client})
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.List(context.Background())
		if !errors.Is(err, errDowngrade) {
			t.Fatalf("List after a redirect to http: %v, want the redirect refused", err)
		}
		if _, ok := loader.IsTransient(err); ok {
			t.Errorf("refused redirect %q is transient", err)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows the redirect's query", err)
		}
	})
}

// TestQueryNeverShown follows a redirect to a signed URL that fails, and
// a server that is gone: neither message may show a query.
func TestQueryNeverShown(t *testing.T) {
	missing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(missing.Close)
	redirect := httptest.NewServer(http.RedirectHandler(missing.URL+"/cdn/model.bin?token="+secret, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()

	tests := map[string]struct {
		url       string
		wantKind  error
		transient bool
	}{
		"redirect to a signed URL that is missing": {url: redirect.URL + "/model.bin?sig=" + secret, wantKind: loader.ErrNotFound},
		"server gone": {url: gone.URL + "/model.bin?sig=" + secret, transient: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src, err := New(Config{URL: tc.url})
			if err != nil {
				t.Fatal(err)
			}
			_, err = src.List(context.Background())
			if err == nil {
				t.Fatal("List succeeded, want an error")
			}
			if tc.wantKind != nil && !errors.Is(err, tc.wantKind) {
				t.Errorf("List error %q does not wrap %q", err, tc.wantKind)
			}
			if _, got := loader.IsTransient(err); got != tc.transient {
				t.Errorf("List error %q: transient = %v, want %v", err, got, tc.transient)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("List error %q shows a query", err)
			}
			f := &loader.File{Path: "model.bin", Size: 10, Version: `"v1"`}
			if _, err := src.Open(context.Background(), f, 0, 10); err == nil || strings.Contains(err.Error(), secret) {
				t.Errorf("Open error %v: want one without the query", err)
			}
		})
	}
}
