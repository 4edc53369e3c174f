package annotations

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	hfCommit  = "5206a32e0bd3067aef1ce90f5528ade7d866253f"
	ociDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	// fileDigest is a SHA-256 as an https fragment carries it.
	fileDigest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	// secret is a credential's value: no message may repeat it.
	secret = "SECRETabc123"
)

// credentialRule is the message of a model URI whose query carries a
// credential, after the parameter's name.
const credentialRule = "): a credential in a pod spec is readable by anyone who can read the pod; " +
	"put it in a Secret named by modelgate.io/model-credentials, or use an unsigned URL"

func credentialErr(param string) string {
	return `must not carry a credential in its query (parameter "` + param + `"` + credentialRule
}

// fragmentRule is the message of an https model URI with another fragment
// than its digest.
const fragmentRule = "fragment must be #sha256=<64 lower-case hex digits>, the expected SHA-256 of the file " +
	"(as pip writes it); no other fragment is accepted"

func TestParseModelURI(t *testing.T) {
	cases := map[string]struct {
		in   string
		want ModelURI
	}{
		"s3 bucket only":      {in: "s3://models", want: ModelURI{Scheme: SchemeS3, Host: "models"}},
		"s3 bucket and slash": {in: "s3://models/", want: ModelURI{Scheme: SchemeS3, Host: "models"}},
		"s3 path":             {in: "s3://models/llama-3-8b", want: ModelURI{Scheme: SchemeS3, Host: "models", Path: "llama-3-8b"}},
		"s3 prefix keeps trailing slash": {
			in:   "s3://models/llama/v1/",
			want: ModelURI{Scheme: SchemeS3, Host: "models", Path: "llama/v1/"},
		},
		"gs dotted bucket": {
			in:   "gs://my_bucket.data/path/to/model",
			want: ModelURI{Scheme: SchemeGS, Host: "my_bucket.data", Path: "path/to/model"},
		},
		"hf without revision": {
			in:   "hf://meta-llama/Llama-3.1-8B-Instruct",
			want: ModelURI{Scheme: SchemeHF, Path: "meta-llama/Llama-3.1-8B-Instruct"},
		},
		"hf commit": {
			in:   "hf://meta-llama/Llama-3.1-8B-Instruct@" + hfCommit,
			want: ModelURI{Scheme: SchemeHF, Path: "meta-llama/Llama-3.1-8B-Instruct", Revision: hfCommit},
		},
		"hf branch with slash": {
			in:   "hf://org/repo@refs/pr/1",
			want: ModelURI{Scheme: SchemeHF, Path: "org/repo", Revision: "refs/pr/1"},
		},
		"pvc claim only": {in: "pvc://models", want: ModelURI{Scheme: SchemePVC, Claim: "models"}},
		"pvc sub path":   {in: "pvc://models/llama", want: ModelURI{Scheme: SchemePVC, Claim: "models", Path: "llama"}},
		"pvc sub path trailing slash": {
			in:   "pvc://shared.models/a/b/",
			want: ModelURI{Scheme: SchemePVC, Claim: "shared.models", Path: "a/b"},
		},
		"https file": {
			in:   "https://huggingface.co/x/resolve/main/model.safetensors",
			want: ModelURI{Scheme: SchemeHTTPS, Host: "huggingface.co", Path: "x/resolve/main/model.safetensors"},
		},
		"https port and a query without credentials": {
			in:   "https://minio.local:9000/models/m.gguf?versionId=3&X-Amz-Expires=60",
			want: ModelURI{Scheme: SchemeHTTPS, Host: "minio.local:9000", Path: "models/m.gguf"},
		},
		"https parameters named like credentials but empty": {
			in:   "https://host/m.gguf?token=&auth",
			want: ModelURI{Scheme: SchemeHTTPS, Host: "host", Path: "m.gguf"},
		},
		"https Signature without Key-Pair-Id is not CloudFront's": {
			in:   "https://host/m.gguf?Signature=v2",
			want: ModelURI{Scheme: SchemeHTTPS, Host: "host", Path: "m.gguf"},
		},
		"https digest fragment": {
			in:   "https://host/models/m.gguf#sha256=" + fileDigest,
			want: ModelURI{Scheme: SchemeHTTPS, Host: "host", Path: "models/m.gguf", SHA256: fileDigest},
		},
		"https query and digest fragment": {
			in:   "https://host/m.gguf?download=1#sha256=" + fileDigest,
			want: ModelURI{Scheme: SchemeHTTPS, Host: "host", Path: "m.gguf", SHA256: fileDigest},
		},
		"https ipv6": {in: "https://[::1]:8443/m", want: ModelURI{Scheme: SchemeHTTPS, Host: "[::1]:8443", Path: "m"}},
		"https escaped path": {
			in:   "https://example.com/a%20b/model.bin",
			want: ModelURI{Scheme: SchemeHTTPS, Host: "example.com", Path: "a b/model.bin"},
		},
		"oci tag": {
			in:   "oci://ghcr.io/org/model:v1",
			want: ModelURI{Scheme: SchemeOCI, Host: "ghcr.io", Path: "org/model", Tag: "v1"},
		},
		"oci digest with port": {
			in:   "oci://localhost:5000/model@" + ociDigest,
			want: ModelURI{Scheme: SchemeOCI, Host: "localhost:5000", Path: "model", Digest: ociDigest},
		},
		"oci tag and digest": {
			in:   "oci://registry.svc.cluster.local/a/b__c/d-e:1.0@" + ociDigest,
			want: ModelURI{Scheme: SchemeOCI, Host: "registry.svc.cluster.local", Path: "a/b__c/d-e", Tag: "1.0", Digest: ociDigest},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseModelURI(tc.in)
			if err != nil {
				t.Fatalf("ParseModelURI(%q) error: %v", tc.in, err)
			}
			tc.want.Raw = tc.in
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseModelURI(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseModelURIErrors(t *testing.T) {
	const bucketRule = "must be 3 to 63 characters of a-z, 0-9, '.', '-' and '_', starting and ending with a letter or digit"
	cases := map[string]struct {
		in      string
		wantErr string
		// prefix compares only the start of the message, for the messages
		// that end with apimachinery's own wording.
		prefix bool
	}{
		"empty":      {in: "", wantErr: "must not be empty"},
		"no scheme":  {in: "models/llama", wantErr: "must be a URI like s3://bucket/path (supported schemes: s3, gs, hf, pvc, https, oci)"},
		"ftp":        {in: "ftp://host/model", wantErr: `unsupported scheme "ftp" (supported: s3, gs, hf, pvc, https, oci)`},
		"http":       {in: "http://host/model", wantErr: `unsupported scheme "http" (supported: s3, gs, hf, pvc, https, oci)`},
		"upper case": {in: "S3://models/x", wantErr: `unsupported scheme "S3" (supported: s3, gs, hf, pvc, https, oci)`},
		"space":      {in: "s3://models/a b", wantErr: "must not contain spaces, control or non-ASCII characters (percent-encode them)"},
		"non-ascii":  {in: "s3://models/modèle", wantErr: "must not contain spaces, control or non-ASCII characters (percent-encode them)"},

		"s3 no bucket":           {in: "s3://", wantErr: "must name a bucket: s3://bucket/path"},
		"gs no bucket":           {in: "gs:///path", wantErr: "must name a bucket: gs://bucket/path"},
		"s3 upper bucket":        {in: "s3://Models/x", wantErr: `bucket "Models" ` + bucketRule},
		"gs short bucket":        {in: "gs://b/p", wantErr: `bucket "b" ` + bucketRule},
		"s3 long bucket":         {in: "s3://" + strings.Repeat("a", 64), wantErr: `bucket "` + strings.Repeat("a", 64) + `" ` + bucketRule},
		"s3 dot dot":             {in: "s3://models/../x", wantErr: `path "../x" must not contain ".." segments`},
		"gs dot":                 {in: "gs://models/a/./b", wantErr: `path "a/./b" must not contain "." segments`},
		"s3 double slash":        {in: "s3://models//x", wantErr: `path "/x" must be relative, without empty segments ("//")`},
		"hf one segment":         {in: "hf://llama", wantErr: "must be hf://org/repo or hf://org/repo@revision"},
		"hf three segments":      {in: "hf://org/repo/file", wantErr: "must be hf://org/repo or hf://org/repo@revision"},
		"hf empty org":           {in: "hf:///repo", wantErr: "must be hf://org/repo or hf://org/repo@revision"},
		"hf leading dash":        {in: "hf://-org/repo", wantErr: `hf name "-org" must be at most 96 letters, digits, '.', '_' and '-', not starting or ending with '.' or '-' and without ".."`},
		"hf trailing dot":        {in: "hf://org/repo.", wantErr: `hf name "repo."`, prefix: true},
		"hf dot dot":             {in: "hf://org/re..po", wantErr: `hf name "re..po"`, prefix: true},
		"hf empty revision":      {in: "hf://org/repo@", wantErr: "hf revision after '@' must not be empty"},
		"hf revision dots":       {in: "hf://org/repo@a..b", wantErr: `hf revision "a..b" must be a branch, tag or commit: at most 255 letters, digits, '.', '_', '-' and '/', without ".." or empty path segments`},
		"hf revision slash":      {in: "hf://org/repo@/main", wantErr: `hf revision "/main"`, prefix: true},
		"hf two revisions":       {in: "hf://org/repo@a@b", wantErr: `hf revision "a@b"`, prefix: true},
		"pvc no claim":           {in: "pvc://", wantErr: "must name a claim: pvc://claim[/sub/path]"},
		"pvc bad claim":          {in: "pvc://Models/x", wantErr: `claim "Models" is not a valid PersistentVolumeClaim name: `, prefix: true},
		"pvc dot dot":            {in: "pvc://models/../etc", wantErr: `path "../etc" must not contain ".." segments`},
		"pvc absolute":           {in: "pvc://models//etc", wantErr: `path "/etc" must be relative, without empty segments ("//")`},
		"https credentials":      {in: "https://user:pass@host/x", wantErr: "must not contain credentials (user:password@); put them in a Secret and name it in modelgate.io/model-credentials"},
		"https token user":       {in: "https://token@host/x", wantErr: "must not contain credentials (user:password@); put them in a Secret and name it in modelgate.io/model-credentials"},
		"https no path":          {in: "https://host", wantErr: "must name a model file or folder: https://host/path/model.safetensors"},
		"https root path":        {in: "https://host/", wantErr: "must name a model file or folder: https://host/path/model.safetensors"},
		"https no host":          {in: "https:///x", wantErr: "must name a host: https://host/path"},
		"https bad port":         {in: "https://host:99999/x", wantErr: `port "99999" must be a number from 1 to 65535`},
		"https non-num port":     {in: "https://host:abc/x", wantErr: `is not a valid https URL: invalid port ":abc" after host`},
		"https bad host":         {in: "https://ho_st/x", wantErr: `host "ho_st" must be a DNS name or an IP address`},
		"https encoded control":  {in: "https://host/a%0Ab", wantErr: "path must not encode control characters or invalid UTF-8"},
		"https encoded non-utf8": {in: "https://host/%80", wantErr: "path must not encode control characters or invalid UTF-8"},
		"https fragment":         {in: "https://host/x#frag", wantErr: fragmentRule},
		"https empty fragment":   {in: "https://host/x#", wantErr: fragmentRule},
		"https upper-case digest": {
			in: "https://host/x#sha256=" + strings.ToUpper(fileDigest), wantErr: fragmentRule,
		},
		"https short digest":      {in: "https://host/x#sha256=9f86d081", wantErr: fragmentRule},
		"https other algorithm":   {in: "https://host/x#md5=0cc175b9c0f1b6a831c399e269772661", wantErr: fragmentRule},
		"https digest and more":   {in: "https://host/x#sha256=" + fileDigest + "&egg=x", wantErr: fragmentRule},
		"https token in fragment": {in: "https://host/x#access_token=" + secret, wantErr: fragmentRule},
		"s3 presigned": {
			in:      "https://bucket.s3.amazonaws.com/m.gguf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA" + secret + "&X-Amz-Signature=" + secret,
			wantErr: credentialErr("X-Amz-Credential"),
		},
		"s3 presigned, signature first": {
			in: "https://minio.local:9000/models/m.gguf?X-Amz-Signature=" + secret + "&X-Amz-Expires=60", wantErr: credentialErr("X-Amz-Signature"),
		},
		"s3 session token":       {in: "https://host/m?X-Amz-Security-Token=" + secret, wantErr: credentialErr("X-Amz-Security-Token")},
		"gcs signed":             {in: "https://storage.googleapis.com/b/m?X-Goog-Signature=" + secret, wantErr: credentialErr("X-Goog-Signature")},
		"gcs credential":         {in: "https://storage.googleapis.com/b/m?X-Goog-Credential=" + secret, wantErr: credentialErr("X-Goog-Credential")},
		"cloudfront signed":      {in: "https://d1.cloudfront.net/m?Expires=1&Signature=" + secret + "&Key-Pair-Id=K2", wantErr: credentialErr("Signature")},
		"cloudfront, pair first": {in: "https://d1.cloudfront.net/m?Key-Pair-Id=K2&Policy=p&Signature=" + secret, wantErr: credentialErr("Signature")},
		"azure sas":              {in: "https://acct.blob.core.windows.net/c/m?sv=2022-11-02&sp=r&sig=" + secret, wantErr: credentialErr("sig")},
		"token":                  {in: "https://host/m?token=" + secret, wantErr: credentialErr("token")},
		"access token":           {in: "https://host/m?access_token=" + secret, wantErr: credentialErr("access_token")},
		"api key":                {in: "https://host/m?api_key=" + secret, wantErr: credentialErr("api_key")},
		"apikey":                 {in: "https://host/m?apikey=" + secret, wantErr: credentialErr("apikey")},
		"auth":                   {in: "https://host/m?auth=" + secret, wantErr: credentialErr("auth")},
		"password":               {in: "https://host/m?password=" + secret, wantErr: credentialErr("password")},
		"any letter case":        {in: "https://host/m?x-AMZ-signature=" + secret, wantErr: credentialErr("x-AMZ-signature")},
		"an escaped name":        {in: "https://host/m?X%2DAmz%2DSignature=" + secret, wantErr: credentialErr("X%2DAmz%2DSignature")},
		"after a semicolon":      {in: "https://host/m?a=1;sig=" + secret, wantErr: credentialErr("sig")},
		"with a digest":          {in: "https://host/m?token=" + secret + "#sha256=" + fileDigest, wantErr: credentialErr("token")},
		"https dot dot":          {in: "https://host/a/%2e%2e/b", wantErr: `path "a/../b" must not contain ".." segments`},
		"oci no reference":       {in: "oci://ghcr.io/org/model", wantErr: "must name a tag or a digest so the model is reproducible (for example oci://ghcr.io/org/model:v1 or oci://ghcr.io/org/model@sha256:<64 hex digits>)"},
		"oci port no tag":        {in: "oci://localhost:5000/model", wantErr: "must name a tag or a digest", prefix: true},
		"oci upper repo":         {in: "oci://ghcr.io/Org/Model:v1", wantErr: `repository "Org/Model" must be lower-case path components of a-z and 0-9 joined by '.', '_', '__' or '-', separated by '/' (for example org/model)`},
		"oci short digest":       {in: "oci://ghcr.io/org/model@sha256:abc", wantErr: `digest "sha256:abc" must be sha256: followed by 64 lower-case hex digits`},
		"oci sha512":             {in: "oci://ghcr.io/org/model@sha512:abc", wantErr: `digest "sha512:abc"`, prefix: true},
		"oci bad tag":            {in: "oci://ghcr.io/org/model:-v1", wantErr: `tag "-v1" must be 1 to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'`},
		"oci empty tag":          {in: "oci://ghcr.io/org/model:", wantErr: `tag ""`, prefix: true},
		"oci credentials":        {in: "oci://user:pw@ghcr.io/org/m:v1", wantErr: "must not contain credentials", prefix: true},
		"oci short registry":     {in: "oci://org/model:v1", wantErr: `registry "org" must be a host name with a dot or a port, or localhost (for example oci://ghcr.io/org/model:v1)`},
		"oci no repository":      {in: "oci://ghcr.io", wantErr: "must name a repository: oci://registry/repo:tag"},
		"oci empty repo":         {in: "oci://ghcr.io/", wantErr: "must name a repository: oci://registry/repo:tag"},
		"oci no registry":        {in: "oci:///org/m:v1", wantErr: "must name a registry: oci://registry/repo:tag"},
		"oci zero port":          {in: "oci://ghcr.io:0/org/m:v1", wantErr: `port "0" must be a number from 1 to 65535`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseModelURI(tc.in)
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("error %q repeats the credential", err)
			}
			if err == nil {
				t.Fatalf("ParseModelURI(%q) = %+v, want an error", tc.in, got)
			}
			if got != (ModelURI{}) {
				t.Errorf("ParseModelURI(%q) returned %+v with its error, want the zero ModelURI", tc.in, got)
			}
			msg := err.Error()
			if tc.prefix {
				if !strings.HasPrefix(msg, tc.wantErr) {
					t.Errorf("error = %q, want it to start with %q", msg, tc.wantErr)
				}
				return
			}
			if msg != tc.wantErr {
				t.Errorf("error = %q, want %q", msg, tc.wantErr)
			}
		})
	}
}

func TestModelURIPinned(t *testing.T) {
	cases := map[string]struct {
		in   string
		want bool
	}{
		"hf commit":          {in: "hf://org/repo@" + hfCommit, want: true},
		"hf branch":          {in: "hf://org/repo@main", want: false},
		"hf upper-case hash": {in: "hf://org/repo@" + strings.ToUpper(hfCommit), want: false},
		"hf short hash":      {in: "hf://org/repo@5206a32", want: false},
		"hf no revision":     {in: "hf://org/repo", want: false},
		"oci digest":         {in: "oci://ghcr.io/org/model@" + ociDigest, want: true},
		"oci tag and digest": {in: "oci://ghcr.io/org/model:v1@" + ociDigest, want: true},
		"oci tag":            {in: "oci://ghcr.io/org/model:v1", want: false},
		"s3":                 {in: "s3://models/llama", want: false},
		"pvc":                {in: "pvc://models/llama", want: false},
		"https":              {in: "https://host/model.bin", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u, err := ParseModelURI(tc.in)
			if err != nil {
				t.Fatalf("ParseModelURI(%q) error: %v", tc.in, err)
			}
			if got := u.Pinned(); got != tc.want {
				t.Errorf("Pinned() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRedactURI(t *testing.T) {
	cases := map[string]struct {
		in, want string
	}{
		"https user and password": {in: "https://user:pass@host/x", want: "https://redacted@host/x"},
		"https signed query": {
			in:   "https://host/x?X-Amz-Expires=60&x-amz-signature=" + secret + "&a=b;SIG=" + secret + "&token",
			want: "https://host/x?X-Amz-Expires=60&x-amz-signature=redacted&a=b;SIG=redacted&token",
		},
		"any Signature":           {in: "https://host/x?Signature=" + secret, want: "https://host/x?Signature=redacted"},
		"an escaped name":         {in: "https://host/x?access%5Ftoken=" + secret, want: "https://host/x?access%5Ftoken=redacted"},
		"user, query and digest":  {in: "https://u:p@host/x?token=" + secret + "#sha256=" + fileDigest, want: "https://redacted@host/x?token=redacted#sha256=" + fileDigest},
		"another fragment":        {in: "https://host/x#access_token=" + secret, want: "https://host/x#redacted"},
		"hf revision and a token": {in: "hf://org/repo@main?token=" + secret, want: "hf://org/repo@main?token=redacted"},
		"https token, no path":    {in: "https://tok@host", want: "https://redacted@host"},
		"oci":                     {in: "oci://u:p@ghcr.io/org/m:v1", want: "oci://redacted@ghcr.io/org/m:v1"},
		"at sign in the path":     {in: "oci://ghcr.io/org/m@sha256:ab", want: "oci://ghcr.io/org/m@sha256:ab"},
		"hf revision":             {in: "hf://org@main", want: "hf://org@main"},
		"no scheme":               {in: "user:pass@host", want: "user:pass@host"},
		"nothing to hide":         {in: "s3://models/x", want: "s3://models/x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := RedactURI(tc.in); got != tc.want {
				t.Errorf("RedactURI(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// The regular expressions isHFName and isHFRevision stand for.
var (
	hfNameRE     = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?$`)
	hfRevisionRE = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)
)

// TestHFNamesMatchTheirRegexps checks isHFName and isHFRevision against the
// regular expressions they stand for: every string of up to 4 characters
// from an alphabet of each kind of character, and the lengths around the
// name's bound of 96. FuzzHFNames explores further.
func TestHFNamesMatchTheirRegexps(t *testing.T) {
	alphabet := []string{"a", "Z", "7", "_", ".", "-", "/", " ", "é", "@"}
	var all []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		all = append(all, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 4)
	for _, n := range []int{95, 96, 97} {
		for _, end := range []string{"a", "-", "."} {
			all = append(all, strings.Repeat("x", n-1)+end, "-"+strings.Repeat("x", n-1))
		}
	}
	for _, s := range all {
		checkHFName(t, s)
	}
}

func checkHFName(t *testing.T, s string) {
	t.Helper()
	if got, want := isHFName(s), hfNameRE.MatchString(s); got != want {
		t.Errorf("isHFName(%q) = %v, the regexp says %v", s, got, want)
	}
	if got, want := isHFRevision(s), hfRevisionRE.MatchString(s); got != want {
		t.Errorf("isHFRevision(%q) = %v, the regexp says %v", s, got, want)
	}
}

func FuzzHFNames(f *testing.F) {
	for _, s := range []string{"meta-llama", "Llama-3.1-8B", "refs/pr/1", "a//b", "-x", "x.", "main"} {
		f.Add(s)
	}
	f.Fuzz(checkHFName)
}
