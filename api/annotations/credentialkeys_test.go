package annotations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseCredentialKeys(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []CredentialKey
		// wantErr is a part of the message.
		wantErr string
	}{
		"one pair": {in: "HF_TOKEN=hf_api_token", want: []CredentialKey{{Env: "HF_TOKEN", Key: "hf_api_token"}}},
		"a pair of S3 keys": {
			in:   "AWS_ACCESS_KEY_ID=accessKey,AWS_SECRET_ACCESS_KEY=secretKey",
			want: []CredentialKey{{Env: "AWS_ACCESS_KEY_ID", Key: "accessKey"}, {Env: "AWS_SECRET_ACCESS_KEY", Key: "secretKey"}},
		},
		"spaces dropped, order kept": {
			in:   " OCI_PASSWORD = password , OCI_USERNAME=user.name ",
			want: []CredentialKey{{Env: "OCI_PASSWORD", Key: "password"}, {Env: "OCI_USERNAME", Key: "user.name"}},
		},
		"a JSON key with dots": {
			in:   "GOOGLE_APPLICATION_CREDENTIALS_JSON=key.json",
			want: []CredentialKey{{Env: "GOOGLE_APPLICATION_CREDENTIALS_JSON", Key: "key.json"}},
		},
		"one key for two variables": {
			in:   "HF_TOKEN=token,HUGGING_FACE_HUB_TOKEN=token",
			want: []CredentialKey{{Env: "HF_TOKEN", Key: "token"}, {Env: "HUGGING_FACE_HUB_TOKEN", Key: "token"}},
		},
		"empty":                               {in: " ", wantErr: "must be comma-separated VAR=key pairs"},
		"empty entry":                         {in: "HF_TOKEN=token,,", wantErr: "there is an empty entry"},
		"no equals sign":                      {in: "HF_TOKEN", wantErr: `"HF_TOKEN" is not VAR=key`},
		"no key":                              {in: "HF_TOKEN=", wantErr: `"HF_TOKEN=" is not VAR=key`},
		"no variable":                         {in: "=token", wantErr: `"=token" is not VAR=key`},
		"key and variable swapped":            {in: "hf_api_token=HF_TOKEN", wantErr: `variable "hf_api_token" is not one the loader reads credentials from: VAR must be one of HF_TOKEN, HUGGING_FACE_HUB_TOKEN, HF_ENDPOINT, AWS_ACCESS_KEY_ID`},
		"a variable the loader does not read": {in: "GITHUB_TOKEN=token", wantErr: `variable "GITHUB_TOKEN" is not one`},
		"a file variable":                     {in: "GOOGLE_APPLICATION_CREDENTIALS=key.json", wantErr: `variable "GOOGLE_APPLICATION_CREDENTIALS" is not one`},
		"duplicate variable":                  {in: "HF_TOKEN=a,HF_TOKEN=b", wantErr: `variable "HF_TOKEN" is given more than once`},
		"key with a slash":                    {in: "HF_TOKEN=hf/token", wantErr: `key "hf/token" of HF_TOKEN=hf/token is not a valid Secret key: a valid config key must consist of alphanumeric characters`},
		"key with a space":                    {in: "HF_TOKEN=hf token", wantErr: `key "hf token" of HF_TOKEN=hf token is not a valid Secret key`},
		"a second equals sign":                {in: "HF_TOKEN=a=b", wantErr: `key "a=b"`},
		"key too long":                        {in: "HF_TOKEN=" + strings.Repeat("k", 254), wantErr: "must be no more than 253 characters"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseCredentialKeys(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseCredentialKeys(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
				}
				if got != nil {
					t.Errorf("ParseCredentialKeys(%q) returned %v with its error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCredentialKeys(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseCredentialKeys(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// The annotation through the parser: where it applies, and the errors that
// name it with the value written.
func TestParserCredentialKeys(t *testing.T) {
	tmpl := func(key string) *field.Path { return templateAnnotations.Key(key) }
	hfModel := func(keys ...CredentialKey) *ModelSettings {
		return &ModelSettings{
			URI:       ModelURI{Raw: "hf://org/repo", Scheme: SchemeHF, Path: "org/repo"},
			MountPath: DefaultModelMount, Cache: Cache{Medium: CacheDisk}, Credentials: "hf-secret", CredentialKeys: keys,
		}
	}
	profiles := map[string]map[string]string{
		"hf-keys": {ModelCredentialsKeys: "HF_TOKEN=token"},
		"hf-all":  {ModelCredentials: "hf-secret", ModelCredentialsKeys: "HF_TOKEN=token"},
	}
	cases := map[string]struct {
		object, template map[string]string
		want             *ModelSettings
		wantErrs         field.ErrorList
	}{
		"keys mapped": {
			template: map[string]string{Model: "hf://org/repo", ModelCredentials: "hf-secret", ModelCredentialsKeys: "HF_TOKEN=hf_api_token"},
			want:     hfModel(CredentialKey{Env: "HF_TOKEN", Key: "hf_api_token"}),
		},
		"the template's keys override the object's": {
			object:   map[string]string{ModelCredentialsKeys: "HF_TOKEN=a"},
			template: map[string]string{Model: "hf://org/repo", ModelCredentials: "hf-secret", ModelCredentialsKeys: "HF_TOKEN=b"},
			want:     hfModel(CredentialKey{Env: "HF_TOKEN", Key: "b"}),
		},
		"keys from a profile, for the object's Secret": {
			template: map[string]string{Model: "hf://org/repo", ModelCredentials: "hf-secret", Profile: "hf-keys"},
			want:     hfModel(CredentialKey{Env: "HF_TOKEN", Key: "token"}),
		},
		"a profile's keys without a Secret do not apply": {
			template: map[string]string{Model: "hf://org/repo", Profile: "hf-keys"},
			want:     &ModelSettings{URI: ModelURI{Raw: "hf://org/repo", Scheme: SchemeHF, Path: "org/repo"}, MountPath: DefaultModelMount, Cache: Cache{Medium: CacheDisk}},
		},
		"a profile's Secret and keys": {
			template: map[string]string{Model: "hf://org/repo", Profile: "hf-all"},
			want:     hfModel(CredentialKey{Env: "HF_TOKEN", Key: "token"}),
		},
		"keys require credentials": {
			template: map[string]string{Model: "hf://org/repo", ModelCredentialsKeys: "HF_TOKEN=token"},
			wantErrs: field.ErrorList{field.Invalid(tmpl(ModelCredentialsKeys), "HF_TOKEN=token", "requires modelgate.io/model-credentials")},
		},
		"a pvc model needs no keys": {
			template: map[string]string{Model: "pvc://models/llama", ModelCredentials: "s", ModelCredentialsKeys: "HF_TOKEN=token"},
			wantErrs: field.ErrorList{
				field.Invalid(tmpl(ModelCredentials), "s", "a pvc:// model is mounted directly and needs no credentials"),
				field.Invalid(tmpl(ModelCredentialsKeys), "HF_TOKEN=token", "a pvc:// model is mounted directly and needs no credentials"),
			},
		},
		"a bad value names the annotation and the value": {
			template: map[string]string{Model: "hf://org/repo", ModelCredentials: "hf-secret", ModelCredentialsKeys: "HF_TOKEN:token"},
			wantErrs: field.ErrorList{field.Invalid(tmpl(ModelCredentialsKeys), "HF_TOKEN:token", credentialKeysSyntax+`; "HF_TOKEN:token" is not VAR=key`)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := Parser{Profiles: profiles}.Parse(workload(tc.object, tc.template)...)
			if diff := cmp.Diff(tc.wantErrs, errs); diff != "" {
				t.Fatalf("errors (-want +got):\n%s", diff)
			}
			if tc.wantErrs != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got.Model, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("model settings (-want +got):\n%s", diff)
			}
		})
	}
}

// Keys change the settings hash (the loader they give changes), and no
// keys leave it as it was before the annotation existed.
func TestCredentialKeysHash(t *testing.T) {
	base := Settings{Model: modelOnly()}
	before := base.Hash()
	base.Model.Credentials = "s3-secret"
	withSecret := base.Hash()
	base.Model.CredentialKeys = []CredentialKey{{Env: "AWS_ACCESS_KEY_ID", Key: "accessKey"}}
	if h := base.Hash(); h == withSecret || h == before {
		t.Errorf("hash %q with keys equals one without", h)
	}
	base.Model.CredentialKeys = nil
	if h := base.Hash(); h != withSecret {
		t.Errorf("hash without keys %q, want %q", h, withSecret)
	}
}
