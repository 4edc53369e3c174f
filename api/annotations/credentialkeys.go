package annotations

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LoaderCredentialVars are the variables of modelgate's loader (`modelgate
// load`, docs/loader.md) that modelgate.io/model-credentials-keys may fill
// from a Secret's keys: the credentials of each scheme, and the endpoint and
// region that go with them. The loader reads other variables too (proxies,
// token files, metadata endpoints), which no Secret key holds.
//
// The loader's packages own these names (loader/hf, loader/s3, loader/gcs,
// loader/oci); a test in cmd/modelgate checks that the loader reads every
// one of them.
var LoaderCredentialVars = []string{
	// hf://
	"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT",
	// s3://
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AWS_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
	// gs://: a credentials file's JSON content, where a Secret key holds it.
	"GOOGLE_APPLICATION_CREDENTIALS_JSON",
	// oci://
	"OCI_USERNAME", "OCI_PASSWORD", "OCI_TOKEN",
}

// credentialKeysSyntax says what modelgate.io/model-credentials-keys
// accepts, for messages.
const credentialKeysSyntax = "must be comma-separated VAR=key pairs (for example HF_TOKEN=hf_api_token or " +
	"AWS_ACCESS_KEY_ID=accessKey,AWS_SECRET_ACCESS_KEY=secretKey), where key is a key of the Secret " +
	"named by " + ModelCredentials

// ParseCredentialKeys parses a modelgate.io/model-credentials-keys value:
// comma-separated VAR=key pairs, where VAR is one of LoaderCredentialVars,
// named once, and key is a valid Secret key. Spaces around entries, names
// and keys are dropped. The pairs keep their order.
func ParseCredentialKeys(s string) ([]CredentialKey, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New(credentialKeysSyntax)
	}
	parts := strings.Split(s, ",")
	out := make([]CredentialKey, 0, len(parts))
	for _, p := range parts {
		env, key, ok := strings.Cut(p, "=")
		env, key = strings.TrimSpace(env), strings.TrimSpace(key)
		switch {
		case strings.TrimSpace(p) == "":
			return nil, errors.New(credentialKeysSyntax + "; there is an empty entry")
		case !ok || env == "" || key == "":
			return nil, fmt.Errorf("%s; %q is not VAR=key", credentialKeysSyntax, strings.TrimSpace(p))
		case !slices.Contains(LoaderCredentialVars, env):
			return nil, fmt.Errorf("variable %q is not one the loader reads credentials from: VAR must be one of %s",
				env, strings.Join(LoaderCredentialVars, ", "))
		case slices.ContainsFunc(out, func(k CredentialKey) bool { return k.Env == env }):
			return nil, fmt.Errorf("variable %q is given more than once", env)
		}
		if msgs := validation.IsConfigMapKey(key); len(msgs) > 0 {
			return nil, fmt.Errorf("key %q of %s=%s is not a valid Secret key: %s", key, env, key, strings.Join(msgs, "; "))
		}
		out = append(out, CredentialKey{Env: env, Key: key})
	}
	return out, nil
}

// FormatCredentialKeys writes pairs as ParseCredentialKeys reads them.
func FormatCredentialKeys(keys []CredentialKey) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.Env + "=" + k.Key
	}
	return strings.Join(parts, ",")
}
