package main

import (
	"os"
	"strings"

	"github.com/modelgate/modelgate/mutators"
)

// applyEnvDefaults sets NAME from MODELGATE_DEFAULT_NAME (the
// Configuration's injection.loader.env, as the webhook writes it) where
// the process has no NAME of its own: a value from the Pod's credentials
// Secret, or a key it maps, wins over the cluster's default. It returns
// the names it set.
func applyEnvDefaults() []string {
	var set []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		name, ok := strings.CutPrefix(k, mutators.LoaderDefaultEnvPrefix)
		if !ok || name == "" {
			continue
		}
		if _, own := os.LookupEnv(name); own {
			continue
		}
		if os.Setenv(name, v) == nil {
			set = append(set, name)
		}
	}
	return set
}
