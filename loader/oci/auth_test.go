package oci

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/loader"
)

// dockerConfig writes a docker config giving host user:pass to dir/name.
func dockerConfig(t *testing.T, name, host, user, pass string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"auths":{"` + host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, name), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCredentials(t *testing.T) {
	const secret = "s3cret-value"
	cases := map[string]struct {
		bearer  bool // the registry wants a bearer token from its token endpoint
		env     func(host string) map[string]string
		wantErr error
		wantMsg string
	}{
		"basic from OCI_USERNAME and OCI_PASSWORD": {
			env: func(string) map[string]string { return map[string]string{EnvUsername: "alice", EnvPassword: secret} },
		},
		"basic, wrong password": {
			env: func(string) map[string]string {
				return map[string]string{EnvUsername: "alice", EnvPassword: "wrong-" + secret}
			},
			wantErr: loader.ErrAccessDenied, wantMsg: "credentials: OCI_USERNAME and OCI_PASSWORD",
		},
		"anonymous": {
			env:     func(string) map[string]string { return nil },
			wantErr: loader.ErrAccessDenied, wantMsg: "anonymous",
		},
		"docker config.json": {
			env: func(host string) map[string]string {
				return map[string]string{EnvDockerConfig: dockerConfig(t, "config.json", host, "alice", secret)}
			},
		},
		"mounted dockerconfigjson secret": {
			env: func(host string) map[string]string {
				return map[string]string{EnvDockerConfig: dockerConfig(t, ".dockerconfigjson", host, "alice", secret)}
			},
		},
		"docker config for another registry": {
			env: func(string) map[string]string {
				return map[string]string{EnvDockerConfig: dockerConfig(t, "config.json", "elsewhere.example", "alice", secret)}
			},
			wantErr: loader.ErrAccessDenied, wantMsg: "has no entry for",
		},
		"empty DOCKER_CONFIG directory": {
			env:     func(string) map[string]string { return map[string]string{EnvDockerConfig: t.TempDir()} },
			wantErr: loader.ErrAccessDenied, wantMsg: "holds no config.json",
		},
		"bearer token for OCI_USERNAME and OCI_PASSWORD": {
			bearer: true,
			env:    func(string) map[string]string { return map[string]string{EnvUsername: "alice", EnvPassword: secret} },
		},
		"bearer token refused": {
			bearer: true,
			env: func(string) map[string]string {
				return map[string]string{EnvUsername: "alice", EnvPassword: "wrong-" + secret}
			},
			wantErr: loader.ErrAccessDenied, wantMsg: "getting a token with OCI_USERNAME and OCI_PASSWORD",
		},
		"OCI_TOKEN": {
			bearer: true,
			env:    func(string) map[string]string { return map[string]string{EnvToken: "the-token"} },
		},
		"OCI_TOKEN refused": {
			bearer:  true,
			env:     func(string) map[string]string { return map[string]string{EnvToken: "wrong-" + secret} },
			wantErr: loader.ErrAccessDenied, wantMsg: "credentials: OCI_TOKEN",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newTestRegistry(t)
			r.user, r.pass = "alice", secret
			if tc.bearer {
				r.bearer = "the-token"
			}
			modelPack(t, r.pusher(t, "org/modelpack"))
			s := r.source(t, "org/modelpack", "v1", "", tc.env(r.host))
			l, err := s.List(context.Background())
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				// Blob reads authenticate too.
				if _, err := readAll(t, s, &l.Files[0], 1, 10); err != nil {
					t.Fatalf("Open: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("List error = %v, want %v containing %q", err, tc.wantErr, tc.wantMsg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error quotes a credential: %v", err)
			}
		})
	}
}

func TestListFailures(t *testing.T) {
	cases := map[string]struct {
		set            func(r *testRegistry)
		wantErr        error
		wantTransient  bool
		wantRetryAfter time.Duration
	}{
		"registry unavailable":   {set: func(r *testRegistry) { r.failStatus = 503 }, wantTransient: true, wantRetryAfter: 7 * time.Second},
		"rate limited":           {set: func(r *testRegistry) { r.failStatus = 429 }, wantTransient: true, wantRetryAfter: 7 * time.Second},
		"forbidden":              {set: func(r *testRegistry) { r.failStatus = 403 }, wantErr: loader.ErrAccessDenied},
		"digest header mismatch": {set: func(r *testRegistry) { r.wrongDigest = true }, wantErr: loader.ErrVerification},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newTestRegistry(t)
			modelPack(t, r.pusher(t, "org/modelpack"))
			tc.set(r)
			_, err := r.source(t, "org/modelpack", "v1", "", nil).List(context.Background())
			if err == nil {
				t.Fatal("List succeeded")
			}
			after, transient := loader.IsTransient(err)
			if transient != tc.wantTransient || after != tc.wantRetryAfter {
				t.Errorf("IsTransient(%v) = %v, %v; want %v, %v", err, after, transient, tc.wantRetryAfter, tc.wantTransient)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("List error = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
