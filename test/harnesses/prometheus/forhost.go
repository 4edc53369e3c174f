package prometheus

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// HostFiles are what a Prometheus run as a host process has in place of
// its Pod's.
type HostFiles struct {
	// Mounts maps each folder of the Pod the configuration reads files
	// from (PodServiceAccountDir, PodRulesDir), ending in a slash, to the
	// host folder holding the same files.
	Mounts map[string]string
	// Env is the environment of the Pod's config-reloader, which expands
	// each $(NAME) in the configuration before Prometheus reads it
	// (POD_NAME, SHARD).
	Env map[string]string
	// ScrapeInterval, when not empty, replaces every scrape interval.
	ScrapeInterval string
}

// envRef is a $(NAME) the config-reloader expands.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// ForHost adjusts the configuration the Operator generated for its
// Prometheus Pod to a Prometheus run as a host process. It changes three
// things and keeps everything else as generated:
//
//   - each $(NAME) becomes h.Env's NAME, as the Pod's config-reloader
//     expands it (the replica's external label, the shard the jobs keep);
//   - a path of a file the configuration reads (a rule_files entry, a
//     value of a key ending in _file) under one of h.Mounts's Pod folders
//     moves to its host folder: the rule files' ConfigMaps and the service
//     account's token and CA are files there, not mounts;
//   - with h.ScrapeInterval, every scrape_interval becomes it: the shipped
//     ServiceMonitor's 30 s would have the test wait a minute for each
//     rate to see a change.
//
// It returns an error for a $(NAME) h.Env lacks and for an absolute path
// under no mount, so that nothing the Pod would have is silently missing;
// and with the configuration, each change it made ("key: old -> new"),
// sorted, once.
func ForHost(generated []byte, h HostFiles) ([]byte, []string, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(generated, &cfg); err != nil {
		return nil, nil, fmt.Errorf("the Operator's configuration: %w", err)
	}
	changes := map[string]bool{}
	out, err := forHost(cfg, "", h, changes)
	if err != nil {
		return nil, nil, err
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, slices.Sorted(maps.Keys(changes)), nil
}

// forHost adjusts v, found under key (its map key, or that of the list
// holding it), noting each change.
func forHost(v any, key string, h HostFiles, changes map[string]bool) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			adjusted, err := forHost(e, k, h, changes)
			if err != nil {
				return nil, err
			}
			v[k] = adjusted
		}
		return v, nil
	case []any:
		for i, e := range v {
			adjusted, err := forHost(e, key, h, changes)
			if err != nil {
				return nil, err
			}
			v[i] = adjusted
		}
		return v, nil
	case string:
		adjusted, err := forHostString(v, key, h)
		if err != nil {
			return nil, err
		}
		if adjusted != v {
			changes[fmt.Sprintf("%s: %s -> %s", key, v, adjusted)] = true
		}
		return adjusted, nil
	}
	return v, nil
}

func forHostString(s, key string, h HostFiles) (string, error) {
	var missing []string
	s = envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		val, ok := h.Env[name]
		if !ok {
			missing = append(missing, name)
		}
		return val
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s: $(%s) has no value", key, strings.Join(missing, "), $("))
	}
	switch {
	case key == "scrape_interval" && h.ScrapeInterval != "":
		return h.ScrapeInterval, nil
	case (key == "rule_files" || strings.HasSuffix(key, "_file")) && path.IsAbs(s):
		pods := make([]string, 0, len(h.Mounts))
		for pod := range h.Mounts {
			pods = append(pods, pod)
		}
		slices.Sort(pods)
		for _, pod := range pods {
			if rest, ok := strings.CutPrefix(s, pod); ok {
				return path.Join(h.Mounts[pod], rest), nil
			}
		}
		return "", fmt.Errorf("%s: %s is under no folder the host has", key, s)
	}
	return s, nil
}
