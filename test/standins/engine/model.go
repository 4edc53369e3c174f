package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Errors of model directories, by what is wrong.
var (
	errConfig    = errors.New("bad config.json")
	errNoWeights = errors.New("no *.safetensors")
	errIndex     = errors.New("bad safetensors index")
)

// model is what the engine read.
type model struct {
	Dir           string
	Files         int
	Tensors       int
	Bytes         int64 // the safetensors files' sizes
	Architectures []string
}

// readModel reads the model in dir as an engine loads it: config.json,
// then every safetensors file (those at the top, and those a
// *.safetensors.index.json names), logging a line per file to log.
// Links are followed: the hub cache's snapshots are links into blobs/.
func readModel(ctx context.Context, dir string, log io.Writer) (*model, error) {
	archs, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	files, index, err := weightFiles(dir)
	if err != nil {
		return nil, err
	}
	m := &model{Dir: dir, Files: len(files), Architectures: archs}
	held := map[string]map[string]tensorInfo{}
	for _, f := range files {
		h, size, err := readSafetensors(ctx, filepath.Join(dir, f))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		held[f] = h.Tensors
		m.Tensors += len(h.Tensors)
		m.Bytes += size
		fmt.Fprintf(log, "engine: read %s: %d tensors, %d bytes\n", f, len(h.Tensors), size)
	}
	for _, name := range slices.Sorted(maps.Keys(index)) {
		if _, ok := held[index[name]][name]; !ok {
			return nil, fmt.Errorf("%w: it maps tensor %q to %s, which does not hold it", errIndex, name, index[name])
		}
	}
	return m, nil
}

// readConfig reads config.json, which must be a JSON object, and returns
// its architectures.
func readConfig(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json")) //nolint:gosec // the model directory the engine serves, as the real engine reads it
	if err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %w", errConfig, err)
	}
	if cfg == nil {
		return nil, fmt.Errorf("%w: not a JSON object", errConfig)
	}
	var archs []string
	_ = json.Unmarshal(cfg["architectures"], &archs) // optional: only logged
	return archs, nil
}

// weightFiles lists the safetensors files of dir: those at its top, and
// those named by the weight_map of each *.safetensors.index.json, which
// must exist. index maps each tensor an index names to its file.
func weightFiles(dir string) (files []string, index map[string]string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	set, index := map[string]bool{}, map[string]string{}
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".safetensors"):
			set[name] = true
		case strings.HasSuffix(name, ".safetensors.index.json"):
			var idx struct {
				WeightMap map[string]string `json:"weight_map"`
			}
			b, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // an index file listed in the model directory the engine serves
			if err != nil {
				return nil, nil, err
			}
			if err := json.Unmarshal(b, &idx); err != nil {
				return nil, nil, fmt.Errorf("%w: %s has no weight_map of tensor names to file names: %w", errIndex, name, err)
			}
			if idx.WeightMap == nil {
				return nil, nil, fmt.Errorf("%w: %s has no weight_map of tensor names to file names", errIndex, name)
			}
			for _, tensor := range slices.Sorted(maps.Keys(idx.WeightMap)) {
				f := filepath.Clean(idx.WeightMap[tensor])
				if !filepath.IsLocal(f) {
					return nil, nil, fmt.Errorf("%w: %s puts tensor %q in %q, outside the model directory", errIndex, name, tensor, f)
				}
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					return nil, nil, fmt.Errorf("%s names %s: %w", name, f, err)
				}
				set[f] = true
				index[tensor] = f
			}
		}
	}
	if len(set) == 0 {
		return nil, nil, fmt.Errorf("%w in %s", errNoWeights, dir)
	}
	return slices.Sorted(maps.Keys(set)), index, nil
}
