package s3

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/modelgate/modelgate/loader"
)

// credKind is a source of credentials.
type credKind string

// The credential sources, in the order they are tried.
const (
	credStatic      credKind = "static"
	credWebIdentity credKind = "web-identity"
	credContainer   credKind = "container"
	credSharedFile  credKind = "shared-file"
	credIMDS        credKind = "imds"
	credAnonymous   credKind = "anonymous"
)

// Default addresses of the AWS credential services.
const (
	ecsEndpoint  = "http://169.254.170.2"
	imdsEndpoint = "http://169.254.169.254"
)

// containerHosts are the link-local addresses container credentials may
// be fetched from over plain HTTP (ECS, EKS Pod Identity), besides
// loopback.
var containerHosts = []string{"169.254.170.2", "169.254.170.23", "fd00:ec2::23"}

// credPlan is the credential source the environment configures, with
// what it needs; credentials turns it into a provider.
type credPlan struct {
	Kind credKind
	// Static keys, and the variables they came from.
	AccessKeyID, SecretAccessKey, SessionToken string
	KeyVars                                    keyNames
	// Web identity: the token file, the role to assume and the STS
	// endpoint.
	TokenFile, RoleARN, STSEndpoint string
	// Container credentials: the URI (and the variable that named it) and
	// the authorization token or the file holding it.
	URI, URIVar, AuthToken, AuthTokenFile string
	// Shared credentials file and profile.
	File, Profile string
	// IMDSEndpoint is the instance metadata service probed.
	IMDSEndpoint string
	// Reason says why requests are anonymous.
	Reason string
}

// keyNames are the variables a pair of static keys, and the session token
// that may go with it, are read from.
type keyNames struct {
	ID, Secret, Token string
}

// standardKeys are the AWS variables.
var standardKeys = keyNames{ID: "AWS_ACCESS_KEY_ID", Secret: "AWS_SECRET_ACCESS_KEY", Token: "AWS_SESSION_TOKEN"} //nolint:gosec // variable names, not credentials

// keyAliases are the names Secrets commonly give static keys (the
// credentials file's names, MinIO's and other stores'), which envFrom turns
// into variables of the same name. They are read only when the AWS
// variables are unset, in this order, and a pair only whole: the first
// pair whose two keys are both set is used, with its session token when it
// has one; a lone half of a pair is not a credential and is ignored.
var keyAliases = []keyNames{
	{ID: "aws_access_key_id", Secret: "aws_secret_access_key", Token: "aws_session_token"}, //nolint:gosec // key names, not credentials
	{ID: "access_key_id", Secret: "secret_access_key", Token: "session_token"},
	{ID: "accessKey", Secret: "secretKey", Token: "sessionToken"},
	{ID: "accesskey", Secret: "secretkey"},
}

// staticKeys reads the pair of names from the environment; ok is false
// unless both keys are set.
func staticKeys(getenv func(string) string, n keyNames) (credPlan, bool) {
	id, secret := getenv(n.ID), getenv(n.Secret)
	if id == "" || secret == "" {
		return credPlan{}, false
	}
	p := credPlan{Kind: credStatic, AccessKeyID: id, SecretAccessKey: secret, KeyVars: n}
	if n.Token != "" {
		p.SessionToken = getenv(n.Token)
	}
	return p, true
}

// chooseCredentials picks the credential source from the environment:
// static keys (the AWS variables, else a pair of keyAliases), web identity, container credentials, the shared
// credentials file (when named, or when the default one exists), instance
// metadata, else anonymous. A half-configured source is an error rather
// than a silent fall through to the next one. It reads nothing but getenv
// and exists.
func chooseCredentials(getenv func(string) string, exists func(string) bool) (credPlan, error) {
	if isTrue(getenv("AWS_NO_SIGN_REQUEST")) {
		return credPlan{Kind: credAnonymous, Reason: "AWS_NO_SIGN_REQUEST=true"}, nil
	}

	id, secret := getenv(standardKeys.ID), getenv(standardKeys.Secret)
	switch {
	case id != "" && secret != "":
		p, _ := staticKeys(getenv, standardKeys)
		return p, nil
	case id != "":
		return credPlan{}, fmt.Errorf("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: %w", loader.ErrInvalid)
	case secret != "":
		return credPlan{}, fmt.Errorf("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not: %w", loader.ErrInvalid)
	}
	for _, n := range keyAliases {
		if p, ok := staticKeys(getenv, n); ok {
			return p, nil
		}
	}

	if file := getenv("AWS_WEB_IDENTITY_TOKEN_FILE"); file != "" {
		role := getenv("AWS_ROLE_ARN")
		if role == "" {
			return credPlan{}, fmt.Errorf("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not: %w", loader.ErrInvalid)
		}
		return credPlan{Kind: credWebIdentity, TokenFile: file, RoleARN: role, STSEndpoint: stsEndpoint(getenv)}, nil
	}

	if p, ok, err := containerPlan(getenv); ok || err != nil {
		return p, err
	}

	file, profile := getenv("AWS_SHARED_CREDENTIALS_FILE"), getenv("AWS_PROFILE")
	named := file != "" || profile != ""
	if file == "" {
		if home := getenv("HOME"); home != "" {
			file = filepath.Join(home, ".aws", "credentials")
		}
	}
	switch {
	case file != "" && (named || exists(file)):
		return credPlan{Kind: credSharedFile, File: file, Profile: cmp.Or(profile, "default")}, nil
	case named:
		return credPlan{}, fmt.Errorf("AWS_PROFILE is set but there is no credentials file (HOME and AWS_SHARED_CREDENTIALS_FILE are unset): %w", loader.ErrInvalid)
	}

	if isTrue(getenv("AWS_EC2_METADATA_DISABLED")) {
		return credPlan{Kind: credAnonymous, Reason: "no credentials configured and AWS_EC2_METADATA_DISABLED=true"}, nil
	}
	ep := strings.TrimSuffix(cmp.Or(getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT"), imdsEndpoint), "/")
	return credPlan{Kind: credIMDS, IMDSEndpoint: ep}, nil
}

// containerPlan reads the container credentials variables; ok is false
// when none is set.
func containerPlan(getenv func(string) string) (p credPlan, ok bool, err error) {
	p = credPlan{
		Kind:          credContainer,
		AuthToken:     getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
		AuthTokenFile: getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
	}
	if p.AuthTokenFile != "" {
		p.AuthToken = "" // the file wins, as in the AWS SDKs
	}
	if rel := getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		if !strings.HasPrefix(rel, "/") {
			return credPlan{}, true, fmt.Errorf("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must start with '/': %w", loader.ErrInvalid)
		}
		p.URI, p.URIVar = ecsEndpoint+rel, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
		return p, true, nil
	}
	full := getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if full == "" {
		return credPlan{}, false, nil
	}
	u, err := url.Parse(full)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return credPlan{}, true, fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI must be an http:// or https:// URL: %w", loader.ErrInvalid)
	}
	if u.Scheme == "http" && !containerHostAllowed(u.Hostname()) {
		// The authorization token must not travel in clear text to just
		// any host.
		return credPlan{}, true, fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI over plain http must name a loopback or the ECS/EKS credential address, not %q: %w",
			u.Hostname(), loader.ErrInvalid)
	}
	p.URI, p.URIVar = full, "AWS_CONTAINER_CREDENTIALS_FULL_URI"
	return p, true, nil
}

// containerHostAllowed reports whether host may serve container
// credentials over plain HTTP.
func containerHostAllowed(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, h := range containerHosts {
		if ip.Equal(net.ParseIP(h)) {
			return true
		}
	}
	return ip.IsLoopback()
}

// stsEndpoint is where web identity tokens are exchanged:
// AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL (as the AWS SDKs do), else
// the region's STS.
func stsEndpoint(getenv func(string) string) string {
	if ep := cmp.Or(getenv("AWS_ENDPOINT_URL_STS"), getenv("AWS_ENDPOINT_URL")); ep != "" {
		return ep
	}
	switch region := cmp.Or(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")); {
	case region == "":
		return "https://sts.amazonaws.com"
	case strings.HasPrefix(region, "cn-"):
		return "https://sts." + region + ".amazonaws.com.cn"
	default:
		return "https://sts." + region + ".amazonaws.com"
	}
}

// String says where the credentials come from, for messages. It never
// includes a secret, a token or a key.
func (p credPlan) String() string {
	switch p.Kind {
	case credStatic:
		n := p.KeyVars
		if p.SessionToken != "" {
			return fmt.Sprintf("static keys from %s, %s and %s", n.ID, n.Secret, n.Token)
		}
		return fmt.Sprintf("static keys from %s and %s", n.ID, n.Secret)
	case credWebIdentity:
		return fmt.Sprintf("web identity token %s for role %s", p.TokenFile, p.RoleARN)
	case credContainer:
		return "container credentials from " + p.URIVar
	case credSharedFile:
		return fmt.Sprintf("shared credentials file %s, profile %s", p.File, p.Profile)
	case credIMDS:
		return "instance metadata (IMDSv2)"
	default:
		return "no credentials (anonymous: " + p.Reason + ")"
	}
}
