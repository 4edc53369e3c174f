package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/loader"
)

// serve starts a test server for a credential service.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// writeFile writes a file in a temporary directory and returns its name.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

func fakeSTS(t *testing.T) string {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("Action") != "AssumeRoleWithWebIdentity" ||
			r.Form.Get("RoleArn") != "arn:aws:iam::1:role/loader" || r.Form.Get("WebIdentityToken") != "irsa-jwt" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>`+
				`<Code>InvalidIdentityToken</Code><Message>the token is not valid</Message></Error></ErrorResponse>`)
			return
		}
		fmt.Fprint(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
<AssumeRoleWithWebIdentityResult><Credentials>
<AccessKeyId>ASIAWEBIDENTITY</AccessKeyId><SecretAccessKey>web-secret</SecretAccessKey>
<SessionToken>web-session</SessionToken><Expiration>2099-01-01T00:00:00Z</Expiration>
</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`)
	})
}

func fakeContainerAgent(t *testing.T) string {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "pod-identity-token" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"AccessKeyId":"ASIACONTAINER","SecretAccessKey":"c-secret","Token":"c-session","Expiration":"2099-01-01T00:00:00Z"}`)
	})
}

func fakeIMDS(t *testing.T) string {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		const base = "/latest/meta-data/iam/security-credentials/"
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" && r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") != "":
			fmt.Fprint(w, "imds-session")
		case r.Header.Get("X-aws-ec2-metadata-token") != "imds-session":
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case r.URL.Path == base:
			fmt.Fprint(w, "node-role\n")
		case r.URL.Path == base+"node-role":
			fmt.Fprint(w, `{"Code":"Success","AccessKeyId":"ASIAINSTANCE","SecretAccessKey":"i-secret","Token":"i-session","Expiration":"2099-01-01T00:00:00Z"}`)
		default:
			http.NotFound(w, r)
		}
	})
}

// TestCredentialsSent checks, for each credential source, what the store
// receives: requests signed with the source's key (and session token), or
// not signed at all.
func TestCredentialsSent(t *testing.T) {
	noKeys := map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_EC2_METADATA_DISABLED": ""}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range noKeys {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := map[string]struct {
		env            func(t *testing.T) map[string]string
		wantKey        string // "" is anonymous
		wantToken      string
		wantSourceText string
	}{
		"static keys": {
			env:            func(*testing.T) map[string]string { return nil },
			wantKey:        testKeyID,
			wantSourceText: "static keys",
		},
		"static keys with a session token": {
			env:            func(*testing.T) map[string]string { return map[string]string{"AWS_SESSION_TOKEN": "static-session"} },
			wantKey:        testKeyID,
			wantToken:      "static-session",
			wantSourceText: "AWS_SESSION_TOKEN",
		},
		"a Secret's accessKey and secretKey, given whole": {
			env: func(*testing.T) map[string]string {
				return with(map[string]string{"accessKey": testKeyID, "secretKey": testSecret, "sessionToken": "alias-session"})
			},
			wantKey:        testKeyID,
			wantToken:      "alias-session",
			wantSourceText: "static keys from accessKey, secretKey and sessionToken",
		},
		"a Secret's aws_access_key_id and aws_secret_access_key": {
			env: func(*testing.T) map[string]string {
				return with(map[string]string{"aws_access_key_id": testKeyID, "aws_secret_access_key": testSecret})
			},
			wantKey:        testKeyID,
			wantSourceText: "static keys from aws_access_key_id and aws_secret_access_key",
		},
		"no sign request": {
			env:            func(*testing.T) map[string]string { return map[string]string{"AWS_NO_SIGN_REQUEST": "true"} },
			wantSourceText: "anonymous",
		},
		"nothing configured, no instance metadata": {
			env: func(*testing.T) map[string]string {
				return with(map[string]string{"AWS_EC2_METADATA_DISABLED": "true"})
			},
			wantSourceText: "anonymous",
		},
		"web identity": {
			env: func(t *testing.T) map[string]string {
				return with(map[string]string{
					"AWS_WEB_IDENTITY_TOKEN_FILE": writeFile(t, "irsa-jwt\n"), "AWS_ROLE_ARN": "arn:aws:iam::1:role/loader",
					"AWS_ENDPOINT_URL_STS": fakeSTS(t),
				})
			},
			wantKey:        "ASIAWEBIDENTITY",
			wantToken:      "web-session",
			wantSourceText: "web identity",
		},
		"container credentials": {
			env: func(t *testing.T) map[string]string {
				return with(map[string]string{
					"AWS_CONTAINER_CREDENTIALS_FULL_URI":     fakeContainerAgent(t) + "/v1/credentials",
					"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": writeFile(t, "pod-identity-token\n"),
				})
			},
			wantKey:        "ASIACONTAINER",
			wantToken:      "c-session",
			wantSourceText: "container credentials",
		},
		"shared credentials file": {
			env: func(t *testing.T) map[string]string {
				return with(map[string]string{
					"AWS_SHARED_CREDENTIALS_FILE": writeFile(t, "[default]\naws_access_key_id = AKIAWRONG\naws_secret_access_key = x\n"+
						"[models]\naws_access_key_id = AKIAFROMFILE\naws_secret_access_key = f-secret\n"),
					"AWS_PROFILE": "models",
				})
			},
			wantKey:        "AKIAFROMFILE",
			wantSourceText: "profile models",
		},
		"instance metadata": {
			env: func(t *testing.T) map[string]string {
				return with(map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": fakeIMDS(t)})
			},
			wantKey:        "ASIAINSTANCE",
			wantToken:      "i-session",
			wantSourceText: "instance metadata",
		},
		"instance metadata not answering": {
			env: func(t *testing.T) map[string]string {
				hang := serve(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
				return with(map[string]string{"AWS_EC2_METADATA_SERVICE_ENDPOINT": hang})
			},
			wantSourceText: "anonymous",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, nil)
			st.put(t, "m/w.bin", []byte("weights"), nil)
			s := st.source(t, "m", tc.env(t))
			if !strings.Contains(s.creds, tc.wantSourceText) {
				t.Errorf("credential source %q, want one mentioning %q", s.creds, tc.wantSourceText)
			}
			l, err := s.List(context.Background())
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if _, err := readRange(s, &l.Files[0], 0, 1); err != nil {
				t.Fatalf("Open: %v", err)
			}
			reqs := st.requests()
			if len(reqs) < 3 {
				t.Fatalf("%d requests, want a listing, a HEAD and a GET", len(reqs))
			}
			for _, r := range reqs {
				auth := r.Header.Get("Authorization")
				if tc.wantKey == "" {
					if auth != "" || r.URL.Query().Get("X-Amz-Signature") != "" {
						t.Errorf("%s %s is signed (%q), want anonymous", r.Method, r.URL, auth)
					}
				} else if want := "AWS4-HMAC-SHA256 Credential=" + tc.wantKey + "/"; !strings.HasPrefix(auth, want) {
					t.Errorf("%s %s: Authorization %q, want %s...", r.Method, r.URL, auth, want)
				}
				if got := r.Header.Get("X-Amz-Security-Token"); got != tc.wantToken {
					t.Errorf("%s %s: X-Amz-Security-Token %q, want %q", r.Method, r.URL, got, tc.wantToken)
				}
			}
		})
	}
}

// TestCredentialFailures checks that a credential source that fails says
// so, by name, as access denied (or Transient when its service is down).
func TestCredentialFailures(t *testing.T) {
	noKeys := map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
	status := func(code int) func(t *testing.T) string {
		return func(t *testing.T) string {
			return serve(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
		}
	}
	tests := map[string]struct {
		env       func(t *testing.T) map[string]string
		want      error // nil: Transient
		mentioned string
	}{
		"web identity refused": {
			env: func(t *testing.T) map[string]string {
				return map[string]string{
					"AWS_WEB_IDENTITY_TOKEN_FILE": writeFile(t, "not-the-jwt"), "AWS_ROLE_ARN": "arn:aws:iam::1:role/loader",
					"AWS_ENDPOINT_URL_STS": fakeSTS(t),
				}
			},
			want:      loader.ErrAccessDenied,
			mentioned: "arn:aws:iam::1:role/loader",
		},
		"web identity token file missing": {
			env: func(t *testing.T) map[string]string {
				return map[string]string{
					"AWS_WEB_IDENTITY_TOKEN_FILE": filepath.Join(t.TempDir(), "absent"), "AWS_ROLE_ARN": "arn:r",
					"AWS_ENDPOINT_URL_STS": fakeSTS(t),
				}
			},
			want:      loader.ErrAccessDenied,
			mentioned: "web identity token",
		},
		"container agent refuses the token": {
			env: func(t *testing.T) map[string]string {
				return map[string]string{
					"AWS_CONTAINER_CREDENTIALS_FULL_URI": fakeContainerAgent(t), "AWS_CONTAINER_AUTHORIZATION_TOKEN": "stale",
				}
			},
			want:      loader.ErrAccessDenied,
			mentioned: "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		},
		"container agent down": {
			env: func(t *testing.T) map[string]string {
				return map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": status(http.StatusServiceUnavailable)(t)}
			},
			mentioned: "container credentials",
		},
		"profile not in the file": {
			env: func(t *testing.T) map[string]string {
				return map[string]string{
					"AWS_SHARED_CREDENTIALS_FILE": writeFile(t, "[default]\naws_access_key_id = A\naws_secret_access_key = B\n"),
					"AWS_PROFILE":                 "other",
				}
			},
			want:      loader.ErrAccessDenied,
			mentioned: "profile other",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := newStore(t, nil)
			st.put(t, "m/w.bin", []byte("weights"), nil)
			env := tc.env(t)
			for k, v := range noKeys {
				env[k] = v
			}
			_, err := st.source(t, "m", env).List(context.Background())
			if err == nil {
				t.Fatal("List succeeded")
			}
			if _, ok := loader.IsTransient(err); ok != (tc.want == nil) {
				t.Errorf("transient %v, want %v: %v", ok, tc.want == nil, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("got %v, want an error wrapping %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.mentioned) {
				t.Errorf("error %q does not mention %q", err, tc.mentioned)
			}
			if len(st.requests()) != 0 {
				t.Errorf("%d requests reached the store without credentials", len(st.requests()))
			}
		})
	}
}
