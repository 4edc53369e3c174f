package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrHFLookup is returned by ResolveHF when huggingface_hub, run offline in
// the container, would not find the model.
var ErrHFLookup = errors.New("huggingface_hub would not find the model offline")

// ResolveHF finds, as huggingface_hub does offline (HF_HUB_OFFLINE, the
// way `vllm serve org/name` with no --revision loads a model), the
// snapshot directory a serving container would load repoID ("org/name")
// from, and returns it on the host (through the container's mounts and
// r's volumes, as HostPath).
//
// The cache directory is HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, from the
// container's env values (envFrom and valueFrom are not read: modelgate
// sets these in env). A container with none of them would use the image's
// home directory, and is an error; so is one without HF_HUB_OFFLINE set to
// a true value (1, ON, YES, TRUE), which would call the Hub. Then, in
// models--org--name: refs/main holds the commit, read as it is (no
// trimming, as huggingface_hub reads it), and snapshots/<commit> must
// exist.
func ResolveHF(pod *corev1.Pod, servingContainer, repoID string, r *Result) (string, error) {
	ctr, err := findContainer(pod, servingContainer)
	if err != nil {
		return "", err
	}
	org, name, ok := strings.Cut(repoID, "/")
	if !ok || org == "" || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("repository id %q is not org/name", repoID)
	}
	env, unknown := literalEnv(ctr)
	get := func(k string) (string, bool, error) {
		if unknown[k] {
			return "", false, fmt.Errorf("%s of container %q comes from valueFrom, which ResolveHF does not read", k, servingContainer)
		}
		v, ok := mappingOf(env)(k)
		return v, ok, nil
	}
	offline, _, err := get("HF_HUB_OFFLINE")
	if err != nil {
		return "", err
	}
	switch strings.ToUpper(offline) {
	case "1", "ON", "YES", "TRUE":
	default:
		return "", fmt.Errorf("container %q has HF_HUB_OFFLINE=%q: huggingface_hub would call the Hub: %w", servingContainer, offline, ErrHFLookup)
	}
	cache, err := hubCache(get)
	if err != nil {
		return "", fmt.Errorf("container %q: %w", servingContainer, err)
	}
	hostCache, err := HostPath(pod, servingContainer, cache, r)
	if err != nil {
		return "", fmt.Errorf("the hub cache %s: %w", cache, err)
	}
	repoDir := filepath.Join(hostCache, "models--"+org+"--"+name)
	ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")) //nolint:gosec // a test's own directory.
	if err != nil {
		return "", fmt.Errorf("%s: refs/main: %w: %w", path.Join(cache, "models--"+org+"--"+name), err, ErrHFLookup)
	}
	commit := string(ref)
	if commit == "" || commit == "." || commit == ".." || strings.ContainsAny(commit, "/\\\n\r\t ") {
		return "", fmt.Errorf("refs/main of %s holds %q, not a commit: %w", repoID, commit, ErrHFLookup)
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	if fi, err := os.Stat(snap); err != nil || !fi.IsDir() { //nolint:gosec // a directory of the test's own.
		return "", fmt.Errorf("%s: no snapshot directory for commit %s: %w", repoID, commit, ErrHFLookup)
	}
	return snap, nil
}

// hubCache is huggingface_hub's cache directory (constants.py).
func hubCache(get func(string) (string, bool, error)) (string, error) {
	for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		v, ok, err := get(k)
		if err != nil {
			return "", err
		}
		if ok && v != "" {
			return v, nil
		}
	}
	if v, ok, err := get("HF_HOME"); err != nil || (ok && v != "") {
		return path.Join(v, "hub"), err
	}
	if v, ok, err := get("XDG_CACHE_HOME"); err != nil || (ok && v != "") {
		return path.Join(v, "huggingface", "hub"), err
	}
	return "", fmt.Errorf("none of HF_HUB_CACHE, HF_HOME or XDG_CACHE_HOME is set: the cache would be under the image's home directory: %w", ErrHFLookup)
}
