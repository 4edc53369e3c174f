package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
)

// This file finds a model as the engines do offline, through
// huggingface_hub (snapshot_download with local_files_only, and
// try_to_load_from_cache): a directory given as the model is read as it
// is; anything else is a hub repo id, looked up in the hub cache.

// cacheMissError is a hub repo the cache does not hold at the revision
// asked for.
type cacheMissError struct {
	Repo, Revision, Cache, Reason string
}

func (e *cacheMissError) Error() string {
	return fmt.Sprintf("model %s (revision %s) not found in HF cache %s: %s", e.Repo, e.Revision, e.Cache, e.Reason)
}

// repoIDError is a model that is neither a directory nor a repo id
// huggingface_hub accepts; Reason is huggingface_hub's message.
type repoIDError struct {
	ID, Reason string
}

func (e *repoIDError) Error() string {
	return fmt.Sprintf("model %q is not a directory, and not a hub repo id: %s", e.ID, e.Reason)
}

var (
	// commitRE is huggingface_hub's REGEX_COMMIT_HASH.
	commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
	// repoIDRE is huggingface_hub's REPO_ID_REGEX, with \w as Python's
	// (Unicode letters and digits, and _) and its \b word boundaries
	// spelled out: each name begins and ends with a word character.
	repoIDRE = regexp.MustCompile(`^(?:[\p{L}\p{N}_](?:[\p{L}\p{N}_.-]*[\p{L}\p{N}_])?/)?[\p{L}\p{N}_](?:[\p{L}\p{N}_.-]{0,94}[\p{L}\p{N}_])?$`)
	// pyVarRE is what Python's os.path.expandvars expands.
	pyVarRE = regexp.MustCompile(`\$([A-Za-z0-9_]+|\{[^}]*\})`)
)

// validateRepoID checks a repo id as huggingface_hub's validate_repo_id
// does, with its messages.
func validateRepoID(id string) error {
	switch {
	case strings.Count(id, "/") > 1:
		return &repoIDError{id, fmt.Sprintf("Repo id must be in the form 'repo_name' or 'namespace/repo_name': '%s'. Use `repo_type` argument if needed.", id)}
	case !repoIDRE.MatchString(id):
		return &repoIDError{id, fmt.Sprintf("Repo id must use alphanumeric chars, '-', '_' or '.'. The name cannot start or end with '-' or '.' and the maximum length is 96: '%s'.", id)}
	case strings.Contains(id, "--") || strings.Contains(id, ".."):
		return &repoIDError{id, fmt.Sprintf("Cannot have -- or .. in repo_id: '%s'.", id)}
	case strings.HasSuffix(id, ".git"):
		return &repoIDError{id, fmt.Sprintf("Repo_id cannot end by '.git': '%s'.", id)}
	}
	return nil
}

// modelDir finds the directory an engine reads model from: model itself
// if it is a directory, else the snapshot of hub repo model at revision
// ("" is main) in the hub cache directory cache.
func modelDir(model, revision, cache string) (string, error) {
	if fi, err := os.Stat(model); err == nil && fi.IsDir() {
		return filepath.Abs(model)
	}
	if err := validateRepoID(model); err != nil {
		return "", err
	}
	return snapshotDir(cache, model, revision)
}

// hubCacheDir is the hub cache huggingface_hub uses (its HF_HUB_CACHE
// constant): HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub
// (see hfHome). A variable set to "" counts as set, as with os.getenv.
// The result has ~ and $VAR expanded, as huggingface_hub's constants do.
func hubCacheDir(e env) string {
	cache, ok := e.lookup("HF_HUB_CACHE")
	if !ok {
		if cache, ok = e.lookup("HUGGINGFACE_HUB_CACHE"); !ok {
			cache = filepath.Join(hfHome(e), "hub")
		}
	}
	return expandVars(expandUser(cache, e), e)
}

// tgiHubCacheDir is the hub cache Text Generation Inference reads weights
// from: its shards look in huggingface_hub's legacy HUGGINGFACE_HUB_CACHE
// constant (server/text_generation_server/utils/hub.py), which is the
// variable HUGGINGFACE_HUB_CACHE as it is (the launcher sets it from
// --huggingface-hub-cache), else $HF_HOME/hub. HF_HUB_CACHE is not read:
// a model cached only there is not found.
func tgiHubCacheDir(e env) string {
	if cache, ok := e.lookup("HUGGINGFACE_HUB_CACHE"); ok {
		return cache
	}
	return filepath.Join(hfHome(e), "hub")
}

// hfHome is huggingface_hub's HF_HOME: the variable, else
// $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface, with ~ and $VAR
// expanded.
func hfHome(e env) string {
	home, ok := e.lookup("HF_HOME")
	if !ok {
		xdg, ok := e.lookup("XDG_CACHE_HOME")
		if !ok {
			xdg = filepath.Join(expandUser("~", e), ".cache")
		}
		home = filepath.Join(xdg, "huggingface")
	}
	return expandVars(expandUser(home, e), e)
}

// expandUser is Python's os.path.expanduser for ~ and ~/...: HOME, else
// the user's home directory from the password file.
func expandUser(p string, e env) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, ok := e.lookup("HOME")
	if !ok {
		u, err := user.Current()
		if err != nil {
			return p
		}
		home = u.HomeDir
	}
	if h := strings.TrimRight(home, "/") + p[1:]; h != "" {
		return h
	}
	return "/"
}

// expandVars is Python's os.path.expandvars: $NAME and ${NAME} are
// replaced when NAME is set, and left as they are when not.
func expandVars(p string, e env) string {
	return pyVarRE.ReplaceAllStringFunc(p, func(m string) string {
		name := strings.TrimSuffix(strings.TrimPrefix(m[1:], "{"), "}")
		if v, ok := e.lookup(name); ok {
			return v
		}
		return m
	})
}

// snapshotDir finds repo at revision in the hub cache: a 40-hex revision
// is the commit; another is read from refs/<revision>, as it is (the file
// holds the commit, and huggingface_hub does not trim it). The snapshot
// must hold config.json.
func snapshotDir(cache, repo, revision string) (string, error) {
	if revision == "" {
		revision = "main"
	}
	miss := func(format string, a ...any) error {
		return &cacheMissError{Repo: repo, Revision: revision, Cache: cache, Reason: fmt.Sprintf(format, a...)}
	}
	folder := "models--" + strings.ReplaceAll(repo, "/", "--")
	repoDir := filepath.Join(cache, folder)
	if fi, err := os.Stat(repoDir); err != nil || !fi.IsDir() {
		return "", miss("no such repo folder %s", folder)
	}
	commit := revision
	if !commitRE.MatchString(revision) {
		if !filepath.IsLocal(revision) {
			return "", miss("no ref %s", revision)
		}
		b, err := os.ReadFile(filepath.Join(repoDir, "refs", revision)) //nolint:gosec // revision is checked above to be a local path under the repo folder
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", miss("no ref %s", revision)
		case err != nil:
			return "", miss("ref %s: %v", revision, err)
		}
		commit = string(b)
	}
	// The commit is checked to be one local path element before anything
	// under it is looked at.
	snap := filepath.Join(repoDir, "snapshots", commit)
	if !filepath.IsLocal(commit) || strings.Contains(commit, "/") || !isDir(snap) {
		if commitRE.MatchString(commit) {
			return "", miss("no snapshot %s", commit)
		}
		return "", miss("no snapshot %q (read from refs/%s)", commit, revision)
	}
	if fi, err := os.Stat(filepath.Join(snap, "config.json")); err != nil || !fi.Mode().IsRegular() { //nolint:gosec // commit is checked above to be one local path element under the cache's snapshots
		return "", miss("no config.json in snapshots/%s", commit)
	}
	return snap, nil
}

// isDir reports whether p is a directory.
func isDir(p string) bool {
	fi, err := os.Stat(p) //nolint:gosec // a snapshot folder under the cache, its commit checked to be one local path element
	return err == nil && fi.IsDir()
}
