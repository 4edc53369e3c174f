package oci

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/modelgate/modelgate/loader"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestNew(t *testing.T) {
	cases := map[string]struct {
		c         Config
		env       map[string]string
		wantRef   string
		wantPlain bool
		wantErr   string
	}{
		"default tag":          {c: Config{Registry: "r.io", Repository: "m"}, wantRef: "r.io/m:latest"},
		"digest wins":          {c: Config{Registry: "r.io", Repository: "m", Tag: "v1", Digest: testDigest}, wantRef: "r.io/m@" + testDigest},
		"OCI_INSECURE":         {c: Config{Registry: "r.io", Repository: "m"}, env: map[string]string{EnvInsecure: "true"}, wantRef: "r.io/m:latest", wantPlain: true},
		"OCI_INSECURE false":   {c: Config{Registry: "r.io", Repository: "m"}, env: map[string]string{EnvInsecure: "false"}, wantRef: "r.io/m:latest"},
		"OCI_INSECURE garbage": {c: Config{Registry: "r.io", Repository: "m"}, env: map[string]string{EnvInsecure: "yes please"}, wantErr: "OCI_INSECURE"},
		"no registry":          {c: Config{Repository: "m"}, wantErr: "registry must not be empty"},
		"bad repository":       {c: Config{Registry: "r.io", Repository: "M"}, wantErr: `repository "M"`},
		"bad digest":           {c: Config{Registry: "r.io", Repository: "m", Digest: "sha256:zz"}, wantErr: `digest "sha256:zz"`},
		"token and password": {
			c: Config{Registry: "r.io", Repository: "m"}, env: map[string]string{EnvToken: "t", EnvUsername: "u", EnvPassword: "p"},
			wantErr: "not both",
		},
		"user without password": {
			c: Config{Registry: "r.io", Repository: "m"}, env: map[string]string{EnvUsername: "u"},
			wantErr: "OCI_PASSWORD is empty",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.c.Getenv = func(k string) string { return tc.env[k] }
			s, err := New(tc.c)
			if tc.wantErr != "" {
				if !errors.Is(err, loader.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error = %v, want %v containing %q", err, loader.ErrInvalid, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := struct {
				Ref   string
				Plain bool
			}{s.String(), s.plainHTTP}
			want := struct {
				Ref   string
				Plain bool
			}{tc.wantRef, tc.wantPlain}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("New (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCredentialsOnlyForTheRegistry(t *testing.T) {
	env := map[string]string{EnvUsername: "u", EnvPassword: "p"}
	c, err := newCredentials(func(k string) string { return env[k] }, "r.io:5000")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		host string
		want auth.Credential
	}{
		"the registry": {host: "r.io:5000", want: auth.Credential{Username: "u", Password: "p"}},
		"another port": {host: "r.io:443", want: auth.EmptyCredential},
		"another host": {host: "auth.example.com", want: auth.EmptyCredential},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := c.get(t.Context(), tc.host)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("credentials for %s (-want +got):\n%s", tc.host, diff)
			}
		})
	}
}
