package policies

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/go-logr/logr"
	"sigs.k8s.io/yaml"
)

// SourceDirectory is the default Source of policies loaded from a
// directory.
const SourceDirectory = "directory"

// DefaultDebounce is how long a DirSource waits after the last change in
// its directory before it reloads.
const DefaultDebounce = 100 * time.Millisecond

// fileConfig is the optional <name>.yaml beside <name>.rego.
type fileConfig struct {
	EnforcementAction string         `json:"enforcementAction,omitempty"`
	FailurePolicy     string         `json:"failurePolicy,omitempty"`
	Match             Match          `json:"match,omitempty"`
	Parameters        map[string]any `json:"parameters,omitempty"`
	Ratchet           *bool          `json:"ratchet,omitempty"`
}

// LoadDir compiles every policy in dir: each *.rego file except *_test.rego
// is one policy named after the file, with the settings of the sibling
// <name>.yaml if there is one:
//
//	enforcementAction: warn        # deny (default), warn or dryrun
//	failurePolicy: allow           # deny (default) or allow
//	ratchet: false                 # true (default): an UPDATE keeps a violation the old object had
//	match:                         # see Match
//	  kinds: [Deployment]
//	  namespaces: [team-a]
//	  excludedNamespaces: [kube-system]
//	  namespaceSelector: {matchLabels: {modelgate.io/team: nlp}}
//	parameters: {max: 8}           # input.parameters
//
// The YAML is decoded strictly: an unknown field is an error naming it.
// LoadDir returns the policies that compiled, with
// Source SourceDirectory, and one *FileError per file that did not; a
// broken file never stops the others from loading. A <name>.yaml without
// its <name>.rego is an error too.
func LoadDir(ctx context.Context, dir string) ([]*Compiled, []error) {
	cs, errs, err := loadDir(ctx, dir, SourceDirectory)
	if err != nil {
		return nil, []error{err}
	}
	return cs, errs
}

// loadDir returns the policies that compiled and the errors of the files
// that did not, or an error when the directory itself cannot be read.
func loadDir(ctx context.Context, dir, source string) ([]*Compiled, []error, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("reading policy directory: %w", err)
	}
	rego := map[string]bool{}
	var yamls []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // ConfigMap mounts keep their data in ..data and ..<timestamp>
		}
		switch {
		case strings.HasSuffix(name, "_test.rego"):
		case strings.HasSuffix(name, ".rego"):
			rego[strings.TrimSuffix(name, ".rego")] = true
		case strings.HasSuffix(name, ".yaml"):
			yamls = append(yamls, strings.TrimSuffix(name, ".yaml"))
		}
	}
	var out []*Compiled
	var errs []error
	for _, name := range yamls {
		if !rego[name] {
			errs = append(errs, &FileError{File: filepath.Join(dir, name+".yaml"),
				Err: fmt.Errorf("no %s.rego beside it", name)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rego)) {
		c, err := loadFile(ctx, dir, source, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errs, nil
}

// loadFile compiles <dir>/<name>.rego with the settings of <name>.yaml.
func loadFile(ctx context.Context, dir, source, name string) (*Compiled, error) {
	regoPath := filepath.Join(dir, name+".rego")
	src, err := os.ReadFile(regoPath) //nolint:gosec // the directory is the operator's configuration
	if err != nil {
		return nil, &FileError{File: regoPath, Err: err}
	}
	p := Policy{Name: name, Source: source, Filename: regoPath, Module: string(src)}
	yamlPath := filepath.Join(dir, name+".yaml")
	switch raw, err := os.ReadFile(yamlPath); { //nolint:gosec // as above
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, &FileError{File: yamlPath, Err: err}
	default:
		var cfg fileConfig
		if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
			return nil, &FileError{File: yamlPath, Err: err}
		}
		p.Action = Action(cfg.EnforcementAction)
		p.FailurePolicy = FailurePolicy(cfg.FailurePolicy)
		p.Match = cfg.Match
		p.Parameters = cfg.Parameters
		p.NoRatchet = cfg.Ratchet != nil && !*cfg.Ratchet
	}
	c, err := Compile(ctx, p)
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			return nil, &FileError{File: regoPath, Err: err}
		}
		// Action, failure policy, match and parameters come from the YAML.
		return nil, &FileError{File: yamlPath, Err: err}
	}
	return c, nil
}

// DirSource keeps a Store's policies in step with a directory, such as a
// mounted ConfigMap. Every load reads the whole directory again and
// replaces all of the source's policies: a file that fails to load is
// reported and left out, and the previous good version of that file is NOT
// kept, so the Store always reflects exactly what the directory holds.
type DirSource struct {
	// Dir is the directory watched.
	Dir string
	// Store receives the policies.
	Store *Store
	// Source is the policies' source in the Store; give each DirSource its
	// own when running several. SourceDirectory by default.
	Source string
	// Debounce is the quiet time after a change before reloading;
	// DefaultDebounce when zero.
	Debounce time.Duration
	// OnError, if set, is called with every load error (each a *FileError
	// for a broken file) and watch error, besides logging it.
	OnError func(error)
}

// NewDirSource returns a DirSource of dir feeding store, with defaults.
func NewDirSource(dir string, store *Store) *DirSource {
	return &DirSource{Dir: dir, Store: store, Source: SourceDirectory, Debounce: DefaultDebounce}
}

// Load loads the directory once into the Store, and returns (as well as
// reports) the errors of the files that failed. When the directory itself
// cannot be read, the Store keeps the policies it has.
func (d *DirSource) Load(ctx context.Context) []error {
	log := logr.FromContextOrDiscard(ctx)
	cs, errs, err := loadDir(ctx, d.Dir, d.source())
	if err == nil {
		err = d.Store.Replace(d.source(), cs)
	}
	if err != nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		d.report(log, err)
	}
	log.Info("loaded policies", "dir", d.Dir, "loaded", len(cs), "failed", len(errs))
	return errs
}

// Start loads the directory, then reloads it on every change (debounced)
// until ctx is done. It returns an error only when the directory cannot be
// watched. Start makes DirSource a controller-runtime manager Runnable.
func (d *DirSource) Start(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching policy directory: %w", err)
	}
	defer w.Close()
	// Watch before the first load, so no change between the two is lost.
	// A ConfigMap update swaps the ..data symlink: watching the directory
	// sees it, and every event reloads everything.
	if err := w.Add(d.Dir); err != nil {
		return fmt.Errorf("watching policy directory %s: %w", d.Dir, err)
	}
	d.Load(ctx)
	debounce := d.Debounce
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	timer := time.NewTimer(debounce)
	timer.Stop()
	defer timer.Stop()
	log := logr.FromContextOrDiscard(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			log.V(1).Info("policy directory changed", "event", ev.String())
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			d.report(log, fmt.Errorf("watching policy directory %s: %w", d.Dir, err))
		case <-timer.C:
			d.Load(ctx)
		}
	}
}

// NeedLeaderElection is false: every replica serves admission requests, so
// every replica loads the policies.
func (d *DirSource) NeedLeaderElection() bool { return false }

func (d *DirSource) source() string {
	if d.Source == "" {
		return SourceDirectory
	}
	return d.Source
}

func (d *DirSource) report(log logr.Logger, err error) {
	var fe *FileError
	if errors.As(err, &fe) {
		log.Error(err, "policy file failed to load", "file", fe.File)
	} else {
		log.Error(err, "policy directory")
	}
	if d.OnError != nil {
		d.OnError(err)
	}
}
