package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"

	"oras.land/oras-go/v2/registry/remote/auth"
	orascreds "oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/modelgate/modelgate/loader"
)

// dockerConfigNames are the files looked for in DOCKER_CONFIG: the docker
// CLI's, then the key of a kubernetes.io/dockerconfigjson Secret mounted
// as a volume.
var dockerConfigNames = []string{"config.json", ".dockerconfigjson"}

// credSource is where the registry's credentials come from. It hands them
// out for the registry's own host only, so that nothing is ever sent to a
// token realm or blob store on another host.
type credSource struct {
	host   string
	static auth.Credential // from the environment
	store  orascreds.Store // from a docker config, or nil
	source string          // for messages: never the credential itself
	noHit  atomic.Bool     // the docker config had no entry for host
}

// newCredentials reads the credentials for host from the environment:
// OCI_USERNAME and OCI_PASSWORD, or OCI_TOKEN, else DOCKER_CONFIG.
func newCredentials(getenv func(string) string, host string) (*credSource, error) {
	c := &credSource{host: host}
	user, pass, token := getenv(EnvUsername), getenv(EnvPassword), getenv(EnvToken)
	switch {
	case token != "" && (user != "" || pass != ""):
		return nil, fmt.Errorf("set either %s or %s and %s, not both: %w", EnvToken, EnvUsername, EnvPassword, loader.ErrInvalid)
	case token != "":
		c.static, c.source = auth.Credential{AccessToken: token}, EnvToken
		return c, nil
	case user != "" && pass != "":
		c.static, c.source = auth.Credential{Username: user, Password: pass}, EnvUsername+" and "+EnvPassword
		return c, nil
	case user != "":
		return nil, fmt.Errorf("%s is set but %s is empty: %w", EnvUsername, EnvPassword, loader.ErrInvalid)
	case pass != "":
		return nil, fmt.Errorf("%s is set but %s is empty: %w", EnvPassword, EnvUsername, loader.ErrInvalid)
	}
	dir := getenv(EnvDockerConfig)
	if dir == "" {
		c.source = "no credentials (anonymous)"
		return c, nil
	}
	for _, name := range dockerConfigNames {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("docker config %s: %w: %w", p, err, loader.ErrInvalid)
		}
		store, err := orascreds.NewStore(p, orascreds.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("docker config %s: %w: %w", p, err, loader.ErrInvalid)
		}
		c.store, c.source = store, "the docker config "+p
		return c, nil
	}
	c.source = fmt.Sprintf("no credentials (anonymous: %s=%s holds no config.json)", EnvDockerConfig, dir)
	return c, nil
}

// get is the auth.CredentialFunc: the credentials for hostport, empty for
// any other host.
func (c *credSource) get(ctx context.Context, hostport string) (auth.Credential, error) {
	if hostport != c.host {
		return auth.EmptyCredential, nil
	}
	if c.store == nil {
		return c.static, nil
	}
	cred, err := c.store.Get(ctx, orascreds.ServerAddressFromHostname(hostport))
	if err != nil {
		return auth.EmptyCredential, fmt.Errorf("%s: %w", c.source, err)
	}
	if cred == auth.EmptyCredential {
		c.noHit.Store(true)
	}
	return cred, nil
}

// describe names the credentials used, for an access-denied message.
func (c *credSource) describe() string {
	if c.store != nil && c.noHit.Load() {
		return c.source + ", which has no entry for " + c.host + " (anonymous)"
	}
	return c.source
}
