package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHubCacheDir(t *testing.T) {
	all := env{"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HF_HOME": "/c", "XDG_CACHE_HOME": "/d", "HOME": "/e"}
	without := func(keys ...string) env {
		e := env{}
		for k, v := range all {
			e[k] = v
		}
		for _, k := range keys {
			delete(e, k)
		}
		return e
	}
	tests := map[string]struct {
		env  env
		want string
	}{
		"HF_HUB_CACHE first":          {env: all, want: "/a"},
		"then HUGGINGFACE_HUB_CACHE":  {env: without("HF_HUB_CACHE"), want: "/b"},
		"then HF_HOME":                {env: without("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"), want: "/c/hub"},
		"then XDG_CACHE_HOME":         {env: without("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"), want: "/d/huggingface/hub"},
		"then HOME":                   {env: env{"HOME": "/home/nonroot"}, want: "/home/nonroot/.cache/huggingface/hub"},
		"~ in HF_HOME":                {env: env{"HF_HOME": "~/hf", "HOME": "/home/nonroot/"}, want: "/home/nonroot/hf/hub"},
		"$VAR in HF_HUB_CACHE":        {env: env{"HF_HUB_CACHE": "$DATA/${SUB}", "DATA": "/data", "SUB": "hub"}, want: "/data/hub"},
		"an unset $VAR is left as is": {env: env{"HF_HUB_CACHE": "/x/$NOPE/hub"}, want: "/x/$NOPE/hub"},
		"an empty variable is set":    {env: env{"HF_HUB_CACHE": "", "HF_HOME": "/c"}, want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := hubCacheDir(tc.env); got != tc.want {
				t.Errorf("hubCacheDir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTGIHubCacheDir(t *testing.T) {
	tests := map[string]struct {
		env  env
		want string
	}{
		"HUGGINGFACE_HUB_CACHE, as it is": {env: env{"HUGGINGFACE_HUB_CACHE": "~/b", "HF_HUB_CACHE": "/a", "HF_HOME": "/c"}, want: "~/b"},
		"HF_HUB_CACHE is not read":        {env: env{"HF_HUB_CACHE": "/a", "HF_HOME": "/data"}, want: "/data/hub"},
		"the image's HF_HOME":             {env: env{"HF_HOME": "/data"}, want: "/data/hub"},
		"then XDG_CACHE_HOME":             {env: env{"XDG_CACHE_HOME": "/d"}, want: "/d/huggingface/hub"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tgiHubCacheDir(tc.env); got != tc.want {
				t.Errorf("tgiHubCacheDir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateRepoID(t *testing.T) {
	tests := map[string]bool{
		"gpt2":                           true,
		"org/name":                       true,
		"Org_1/name.v2-x":                true,
		"a/b":                            true,
		"org/" + strings.Repeat("n", 96): true,
		"org/" + strings.Repeat("n", 97): false,
		"a/b/c":                          false,
		"/models/tiny":                   false,
		"-org/name":                      false,
		"org/name-":                      false,
		"org/.name":                      false,
		"org--x/name":                    false,
		"org/na..me":                     false,
		"org/name.git":                   false,
		"org/na me":                      false,
		"":                               false,
	}
	for id, valid := range tests {
		t.Run(id, func(t *testing.T) {
			err := validateRepoID(id)
			if (err == nil) != valid {
				t.Errorf("validateRepoID(%q) = %v, want valid: %v", id, err, valid)
			}
		})
	}
}

func TestModelDir(t *testing.T) {
	const (
		commit  = "0123456789abcdef0123456789abcdef01234567"
		commit2 = "89abcdef0123456789abcdef0123456789abcdef"
		absent  = "ffffffffffffffffffffffffffffffffffffffff"
	)
	home := t.TempDir()
	cache := filepath.Join(home, "hub")
	elsewhere := t.TempDir()
	snap := writeSnapshot(t, cache, "org/tiny", commit, tinyModel(t))
	snap2 := writeSnapshot(t, cache, "org/tiny", commit2, tinyModel(t))
	writeRef(t, cache, "org/tiny", "main", commit)
	writeRef(t, cache, "org/tiny", "v1", commit2)
	writeRef(t, cache, "org/tiny", "stale", absent)
	writeRef(t, cache, "org/tiny", "newline", commit+"\n")
	writeSnapshot(t, cache, "org/noconfig", commit, map[string][]byte{"model.safetensors": tinyModel(t)["model.safetensors"]})
	writeRef(t, cache, "org/noconfig", "main", commit)
	plain := filepath.Join(t.TempDir(), "org", "plain")
	writeFiles(t, plain, tinyModel(t))

	hub := env{"HF_HUB_CACHE": cache}
	miss := func(repo, rev, reason string) error {
		return &cacheMissError{Repo: repo, Revision: rev, Cache: cache, Reason: reason}
	}
	tests := map[string]struct {
		model, revision string
		env             env
		want            string
		wantErr         error
	}{
		"refs/main":                 {model: "org/tiny", env: hub, want: snap},
		"a named ref":               {model: "org/tiny", revision: "v1", env: hub, want: snap2},
		"a commit":                  {model: "org/tiny", revision: commit2, env: hub, want: snap2},
		"through HF_HOME":           {model: "org/tiny", env: env{"HF_HOME": home}, want: snap},
		"HF_HUB_CACHE over HF_HOME": {model: "org/tiny", env: env{"HF_HOME": elsewhere, "HF_HUB_CACHE": cache}, want: snap},
		"not HF_HOME when HF_HUB_CACHE is set": {model: "org/tiny", env: env{"HF_HOME": home, "HF_HUB_CACHE": elsewhere},
			wantErr: &cacheMissError{Repo: "org/tiny", Revision: "main", Cache: elsewhere, Reason: "no such repo folder models--org--tiny"}},
		"no ref": {model: "org/tiny", revision: "v2", env: hub,
			wantErr: miss("org/tiny", "v2", "no ref v2")},
		"a ref to a missing snapshot": {model: "org/tiny", revision: "stale", env: hub,
			wantErr: miss("org/tiny", "stale", "no snapshot "+absent)},
		"a commit not in the cache": {model: "org/tiny", revision: absent, env: hub,
			wantErr: miss("org/tiny", absent, "no snapshot "+absent)},
		"a ref is read as it is, not trimmed": {model: "org/tiny", revision: "newline", env: hub,
			wantErr: miss("org/tiny", "newline", `no snapshot "`+commit+`\n" (read from refs/newline)`)},
		"no repo folder": {model: "org/other", env: hub,
			wantErr: miss("org/other", "main", "no such repo folder models--org--other")},
		"no config.json": {model: "org/noconfig", env: hub,
			wantErr: miss("org/noconfig", "main", "no config.json in snapshots/"+commit)},
		"a ref outside refs/": {model: "org/tiny", revision: "../refs/main", env: hub,
			wantErr: miss("org/tiny", "../refs/main", "no ref ../refs/main")},
		"a directory": {model: plain, env: hub, want: plain},
		"not a directory nor a repo id": {model: "/models/tiny", env: hub,
			wantErr: &repoIDError{ID: "/models/tiny", Reason: "Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/models/tiny'. Use `repo_type` argument if needed."}},
		"a bad repo id": {model: "org/a--b", env: hub,
			wantErr: &repoIDError{ID: "org/a--b", Reason: "Cannot have -- or .. in repo_id: 'org/a--b'."}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := modelDir(tc.model, tc.revision, hubCacheDir(tc.env))
			if diff := cmp.Diff(tc.wantErr, err); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if got != tc.want {
				t.Errorf("modelDir = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestModelDirRelative(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{"org/tiny/config.json": []byte("{}")})
	t.Chdir(dir)
	// org/tiny is also a repo id; the directory wins, as in the engines.
	got, err := modelDir("org/tiny", "", filepath.Join(dir, "empty"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "org", "tiny"); got != want {
		t.Errorf("modelDir = %q, want %q", got, want)
	}
	if _, err := os.Stat(got); err != nil {
		t.Error(err)
	}
}
