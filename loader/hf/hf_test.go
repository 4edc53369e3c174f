package hf

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/modelgate/modelgate/loader"
)

// secretToken must never appear in an error.
const secretToken = "hf_SeCrEtToKeN0123456789"

func TestNew(t *testing.T) {
	tests := map[string]struct {
		config  Config
		env     map[string]string
		wantErr bool
		// want are the revision and endpoint New settles on.
		wantRev, wantBase string
	}{
		"defaults":              {config: Config{Repo: "org/model"}, wantRev: "main", wantBase: "https://huggingface.co"},
		"tag":                   {config: Config{Repo: "org/model", Revision: "v1.0"}, wantRev: "v1.0", wantBase: "https://huggingface.co"},
		"pull request ref":      {config: Config{Repo: "org/model", Revision: "refs/pr/1"}, wantRev: "refs/pr/1", wantBase: "https://huggingface.co"},
		"mirror":                {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "https://hf-mirror.com/"}, wantRev: "main", wantBase: "https://hf-mirror.com"},
		"mirror with path":      {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "http://artifactory:8081/api/hf/remote//"}, wantRev: "main", wantBase: "http://artifactory:8081/api/hf/remote"},
		"no org":                {config: Config{Repo: "model"}, wantErr: true},
		"three segments":        {config: Config{Repo: "org/model/x"}, wantErr: true},
		"dot dot":               {config: Config{Repo: "org/..model"}, wantErr: true},
		"empty name":            {config: Config{Repo: "org/"}, wantErr: true},
		"revision with space":   {config: Config{Repo: "org/model", Revision: "my branch"}, wantErr: true},
		"revision dot dot":      {config: Config{Repo: "org/model", Revision: "a/../b"}, wantErr: true},
		"revision empty seg":    {config: Config{Repo: "org/model", Revision: "a//b"}, wantErr: true},
		"endpoint ftp":          {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "ftp://hub"}, wantErr: true},
		"endpoint no host":      {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "https://"}, wantErr: true},
		"endpoint query":        {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "https://hub?x=1"}, wantErr: true},
		"endpoint credentials":  {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "https://user:" + secretToken + "@hub"}, wantErr: true},
		"token control char":    {config: Config{Repo: "org/model"}, env: map[string]string{"HF_TOKEN": secretToken + "\r\nX-Evil: 1"}, wantErr: true},
		"malformed endpoint":    {config: Config{Repo: "org/model"}, env: map[string]string{"HF_ENDPOINT": "https://hub:" + secretToken + "%zz"}, wantErr: true},
		"token with whitespace": {config: Config{Repo: "org/model"}, env: map[string]string{"HF_TOKEN": " " + secretToken + "\n"}, wantRev: "main", wantBase: "https://huggingface.co"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.config.Getenv = func(k string) string { return tc.env[k] }
			s, err := New(tc.config)
			if tc.wantErr {
				if !errors.Is(err, loader.ErrInvalid) {
					t.Fatalf("New error = %v, want one wrapping ErrInvalid", err)
				}
				if strings.Contains(err.Error(), secretToken) {
					t.Errorf("New error %q shows the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if s.rev != tc.wantRev || s.base != tc.wantBase {
				t.Errorf("revision, endpoint = %q, %q, want %q, %q", s.rev, s.base, tc.wantRev, tc.wantBase)
			}
		})
	}
}

func TestToken(t *testing.T) {
	tests := map[string]struct {
		env                map[string]string
		wantToken, wantVar string
	}{
		"none":                        {},
		"HF_TOKEN":                    {env: map[string]string{"HF_TOKEN": "a"}, wantToken: "a", wantVar: "HF_TOKEN"},
		"legacy variable":             {env: map[string]string{"HUGGING_FACE_HUB_TOKEN": "b"}, wantToken: "b", wantVar: "HUGGING_FACE_HUB_TOKEN"},
		"HF_TOKEN first":              {env: map[string]string{"HF_TOKEN": "a", "HUGGING_FACE_HUB_TOKEN": "b"}, wantToken: "a", wantVar: "HF_TOKEN"},
		"blank HF_TOKEN":              {env: map[string]string{"HF_TOKEN": " \n", "HUGGING_FACE_HUB_TOKEN": "b"}, wantToken: "b", wantVar: "HUGGING_FACE_HUB_TOKEN"},
		"trailing new line":           {env: map[string]string{"HF_TOKEN": "a\n"}, wantToken: "a", wantVar: "HF_TOKEN"},
		"LangChain's name":            {env: map[string]string{"HUGGINGFACEHUB_API_TOKEN": "c"}, wantToken: "c", wantVar: "HUGGINGFACEHUB_API_TOKEN"},
		"a Secret's hf_api_token key": {env: map[string]string{"hf_api_token": "d"}, wantToken: "d", wantVar: "hf_api_token"},
		"huggingface_hub's names first": {
			env:       map[string]string{"HUGGING_FACE_HUB_TOKEN": "b", "HF_API_TOKEN": "e", "hf_token": "f", "token": "hf_g"},
			wantToken: "b", wantVar: "HUGGING_FACE_HUB_TOKEN",
		},
		"upper case before lower case": {
			env:       map[string]string{"HUGGINGFACE_TOKEN": "h", "hf_token": "f"},
			wantToken: "h", wantVar: "HUGGINGFACE_TOKEN",
		},
		"token last": {
			env:       map[string]string{"token": "hf_g", "huggingface_token": "i"},
			wantToken: "i", wantVar: "huggingface_token",
		},
		"a Hub token under token": {env: map[string]string{"token": " hf_g\n"}, wantToken: "hf_g", wantVar: "token"},
		// A service account token Secret has a key "token": it must never
		// go to the Hub.
		"another kind of token under token": {env: map[string]string{"token": "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := New(Config{Repo: "org/model", Getenv: func(k string) string { return tc.env[k] }})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			got := [2]string{s.token, s.tokenVar}
			if diff := cmp.Diff([2]string{tc.wantToken, tc.wantVar}, got); diff != "" {
				t.Errorf("token, variable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSameOrigin(t *testing.T) {
	tests := map[string]struct {
		endpoint, target string
		want             bool
	}{
		"same":                  {endpoint: "https://huggingface.co", target: "https://huggingface.co/org/m/resolve/c/f", want: true},
		"explicit default port": {endpoint: "https://huggingface.co", target: "https://huggingface.co:443/x", want: true},
		"host case":             {endpoint: "https://huggingface.co", target: "https://HuggingFace.co/x", want: true},
		"mirror path ignored":   {endpoint: "https://mirror/api/hf", target: "https://mirror/other", want: true},
		"subdomain":             {endpoint: "https://hf.co", target: "https://cdn-lfs.hf.co/repos/x"},
		"parent domain":         {endpoint: "https://cdn.hf.co", target: "https://hf.co/x"},
		"other port":            {endpoint: "http://127.0.0.1:8080", target: "http://127.0.0.1:8081/x"},
		"downgrade to http":     {endpoint: "https://huggingface.co", target: "http://huggingface.co/x"},
		"http default ports":    {endpoint: "http://hub", target: "http://hub:80/x", want: true},
		"https port 80":         {endpoint: "https://hub", target: "https://hub:80/x"},
		"other host":            {endpoint: "https://huggingface.co", target: "https://cas-bridge.xethub.hf.co/x"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ep, _ := url.Parse(tc.endpoint)
			u, _ := url.Parse(tc.target)
			if got := sameOrigin(u, ep); got != tc.want {
				t.Errorf("sameOrigin(%s, %s) = %t, want %t", tc.target, tc.endpoint, got, tc.want)
			}
		})
	}
}

func TestNextLink(t *testing.T) {
	page, _ := url.Parse("https://hub/api/models/o/m/tree/c?recursive=true")
	tests := map[string]struct {
		links   []string
		want    string
		wantErr bool
	}{
		"none":          {},
		"absolute":      {links: []string{`<https://hub/api/models/o/m/tree/c?recursive=true&cursor=YQ>; rel="next"`}, want: "https://hub/api/models/o/m/tree/c?recursive=true&cursor=YQ"},
		"relative":      {links: []string{`</api/models/o/m/tree/c?cursor=Yg>; rel="next"`}, want: "https://hub/api/models/o/m/tree/c?cursor=Yg"},
		"unquoted rel":  {links: []string{`<https://hub/p2>; rel=next`}, want: "https://hub/p2"},
		"among others":  {links: []string{`<https://hub/p1>; rel="prev", <https://hub/p3>; rel="next", <https://hub/p9>; rel="last"`}, want: "https://hub/p3"},
		"two headers":   {links: []string{`<https://hub/p1>; rel="prev"`, `<https://hub/p3>; rel="next"`}, want: "https://hub/p3"},
		"several rels":  {links: []string{`<https://hub/p3>; title="x"; rel="last next"`}, want: "https://hub/p3"},
		"only last":     {links: []string{`<https://hub/p9>; rel="last"`}},
		"unterminated":  {links: []string{`<https://hub/p3; rel="next"`}, wantErr: true},
		"other scheme":  {links: []string{`<file:///etc/passwd>; rel="next"`}, wantErr: true},
		"malformed url": {links: []string{`<https://hub/%zz>; rel="next"`}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := nextLink(http.Header{"Link": tc.links}, page)
			if (err != nil) != tc.wantErr {
				t.Fatalf("nextLink error = %v, want error %t", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("nextLink = %q, want %q", got, tc.want)
			}
		})
	}
}
