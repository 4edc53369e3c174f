package main

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/modelgate/modelgate/api/annotations"
	"github.com/modelgate/modelgate/loader/gcs"
	"github.com/modelgate/modelgate/loader/hf"
	"github.com/modelgate/modelgate/loader/oci"
	"github.com/modelgate/modelgate/loader/s3"
)

// Every variable modelgate.io/model-credentials-keys may fill is one the
// loader reads: each scheme's source is built with an environment that
// records what it is asked for (and holds just enough to walk the
// credential path: static S3 keys, a GCS credentials content). None makes
// a request.
func TestCredentialKeysVariablesAreRead(t *testing.T) {
	var mu sync.Mutex
	read := map[string]bool{}
	env := func(values map[string]string) func(string) string {
		return func(k string) string {
			mu.Lock()
			defer mu.Unlock()
			read[k] = true
			return values[k]
		}
	}
	ctx := context.Background()
	if _, err := hf.New(hf.Config{Repo: "org/model", Getenv: env(nil)}); err != nil {
		t.Fatalf("hf: %v", err)
	}
	if _, err := s3.New(ctx, s3.Config{Bucket: "models", Getenv: env(map[string]string{
		"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret",
	})}); err != nil {
		t.Fatalf("s3: %v", err)
	}
	// Not a credential: the source fails, once it has read the variable.
	_, _ = gcs.New(ctx, gcs.Config{Bucket: "models", Getenv: env(map[string]string{gcs.EnvCredentialsJSON: "{}"})})
	if _, err := oci.New(oci.Config{Registry: "registry.example.com", Repository: "org/model", Getenv: env(nil)}); err != nil {
		t.Fatalf("oci: %v", err)
	}
	for _, v := range annotations.LoaderCredentialVars {
		if !read[v] {
			t.Errorf("modelgate.io/model-credentials-keys accepts %s, which no loader source reads", v)
		}
	}
	// The names the loader's packages export are among them.
	for _, v := range []string{hf.EnvToken, hf.EnvHubToken, hf.EnvEndpoint, gcs.EnvCredentialsJSON, oci.EnvUsername, oci.EnvPassword, oci.EnvToken} {
		if !slices.Contains(annotations.LoaderCredentialVars, v) {
			t.Errorf("annotations.LoaderCredentialVars lacks %s", v)
		}
	}
}
