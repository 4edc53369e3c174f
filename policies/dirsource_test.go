package policies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	maxGPUsRego = "package maxgpus\n\ndeny contains sprintf(\"%d GPUs over %d\", [input.workload.gpu.count, input.parameters.max]) if {\n" +
		"  input.workload.gpu.count > input.parameters.max\n}\n"
	maxGPUsYAML = "enforcementAction: warn\nmatch:\n  kinds: [Deployment]\n  namespaceSelector:\n" +
		"    matchLabels: {modelgate.io/team: nlp}\nparameters:\n  max: 0\n"
	ownerRego = "package owner\n\ndeny contains \"no owner\" if input.workload.owner == \"alice-example.com\"\n"
)

// writeFiles writes name -> content into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// fileErrors renders errors as "base name: error" with dir removed.
func fileErrors(dir string, errs []error) []string {
	var out []string
	for _, err := range errs {
		var fe *FileError
		if !errors.As(err, &fe) {
			out = append(out, "not a FileError: "+err.Error())
			continue
		}
		out = append(out, filepath.Base(fe.File)+": "+strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""))
	}
	return out
}

func TestLoadDir(t *testing.T) {
	cases := map[string]struct {
		files     map[string]string
		wantNames []string
		wantErrs  []string
	}{
		"policies with and without settings": {
			files: map[string]string{
				"maxgpus.rego": maxGPUsRego, "maxgpus.yaml": maxGPUsYAML, "owner.rego": ownerRego,
				"owner_test.rego": "package owner_test\n\ntest_x if true\n", "README.md": "docs",
			},
			wantNames: []string{"maxgpus", "owner"},
		},
		"broken module is reported, others kept": {
			files:     map[string]string{"owner.rego": ownerRego, "broken.rego": "package broken\n\ndeny contains msg if {\n  msg :=\n}\n"},
			wantNames: []string{"owner"},
			wantErrs:  []string{"broken.rego: broken.rego:5:1: rego_parse_error: unexpected } token\n\t}\n\t^"},
		},
		"unknown YAML field is named": {
			files:     map[string]string{"owner.rego": ownerRego, "owner.yaml": "enforcmentAction: warn\n"},
			wantNames: []string{},
			wantErrs: []string{"owner.yaml: owner.yaml: error unmarshaling JSON: while decoding JSON: " +
				`json: unknown field "enforcmentAction"`},
		},
		"bad setting value names the YAML file": {
			files:     map[string]string{"owner.rego": ownerRego, "owner.yaml": "failurePolicy: ignore\n"},
			wantNames: []string{},
			wantErrs:  []string{`owner.yaml: owner.yaml: failure policy "ignore" is not valid: can only be one of deny, allow`},
		},
		"YAML without its module": {
			files:     map[string]string{"owner.rego": ownerRego, "ownr.yaml": "failurePolicy: allow\n"},
			wantNames: []string{"owner"},
			wantErrs:  []string{"ownr.yaml: ownr.yaml: no ownr.rego beside it"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			cs, errs := LoadDir(context.Background(), dir)
			if diff := cmp.Diff(tc.wantErrs, fileErrors(dir, errs)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantNames, NewSet(cs...).Names()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadDirSettings(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"maxgpus.rego": maxGPUsRego, "maxgpus.yaml": maxGPUsYAML})
	cs, errs := LoadDir(context.Background(), dir)
	if len(errs) > 0 || len(cs) != 1 {
		t.Fatalf("LoadDir: %d policies, errors %v", len(cs), errs)
	}
	c := cs[0]
	if c.Action() != ActionWarn || c.Source() != SourceDirectory || c.Filename() != filepath.Join(dir, "maxgpus.rego") {
		t.Errorf("settings: action %q, source %q, file %q", c.Action(), c.Source(), c.Filename())
	}
	nlp := map[string]string{"modelgate.io/team": "nlp"}
	if !c.Matches("Deployment", "a", nlp) || c.Matches("Pod", "a", nlp) || c.Matches("Deployment", "a", nil) {
		t.Error("match from YAML not applied")
	}
	e := NewEngine(Options{})
	e.Swap(NewSet(c))
	d := e.Evaluate(context.Background(), Review{Kind: "Deployment", NamespaceLabels: nlp, Workload: toValue(t, gpuWorkload())})
	if diff := cmp.Diff([]string{"[maxgpus] 1 GPUs over 0"}, d.Warnings()); diff != "" {
		t.Errorf("warnings with YAML parameters (-want +got):\n%s", diff)
	}
}

func TestLoadDirMissing(t *testing.T) {
	_, errs := LoadDir(context.Background(), filepath.Join(t.TempDir(), "missing"))
	if len(errs) != 1 || !errors.Is(errs[0], os.ErrNotExist) {
		t.Errorf("errors = %v, want one wrapping os.ErrNotExist", errs)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDirSourceReload(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"owner.rego": ownerRego})
	e := NewEngine(Options{})
	src := NewDirSource(dir, NewStore(e))
	var mu sync.Mutex
	var reported []error
	src.OnError = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	names := func(want ...string) func() bool {
		return func() bool { return slices.Equal(e.Set().Names(), want) }
	}

	waitFor(t, "the first load", names("owner"))
	writeFiles(t, dir, map[string]string{"maxgpus.rego": maxGPUsRego})
	waitFor(t, "a new file", names("maxgpus", "owner"))

	writeFiles(t, dir, map[string]string{"owner.rego": "package owner\n\ndeny contains"})
	// The set is swapped before the load's errors are reported: wait for
	// both.
	waitFor(t, "a broken file to leave the set and be reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return names("maxgpus")() && len(reported) > 0
	})
	mu.Lock()
	var fe *FileError
	if len(reported) == 0 || !errors.As(reported[len(reported)-1], &fe) || fe.File != filepath.Join(dir, "owner.rego") {
		t.Errorf("reported errors = %v, want a FileError for owner.rego", reported)
	}
	mu.Unlock()

	if err := os.Remove(filepath.Join(dir, "maxgpus.rego")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"owner.rego": ownerRego})
	waitFor(t, "a fix and a removal", names("owner"))
}

// TestDirSourceConfigMap updates the directory the way the kubelet updates
// a mounted ConfigMap: the files are symlinks through ..data, and an update
// swaps ..data to a new timestamped directory.
func TestDirSourceConfigMap(t *testing.T) {
	dir := t.TempDir()
	version := func(name string, files map[string]string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, filepath.Join(dir, name), files)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for f := range files {
			_ = os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f))
		}
	}
	version("..2025_01_01", map[string]string{"owner.rego": ownerRego})

	e := NewEngine(Options{})
	src := NewDirSource(dir, NewStore(e))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	review := Review{Workload: toValue(t, gpuWorkload())}
	denials := func(want ...string) func() bool {
		return func() bool { return slices.Equal(e.Evaluate(context.Background(), review).Denials(), want) }
	}
	waitFor(t, "the first load", denials("[owner] no owner"))
	version("..2025_01_02", map[string]string{
		"owner.rego": strings.Replace(ownerRego, `"no owner"`, `"still no owner"`, 1),
	})
	waitFor(t, "the new ConfigMap version", denials("[owner] still no owner"))
}

func TestDirSourceStartErrors(t *testing.T) {
	src := NewDirSource(filepath.Join(t.TempDir(), "missing"), NewStore(NewEngine(Options{})))
	if err := src.Start(context.Background()); err == nil {
		t.Error("Start on a missing directory succeeded, want an error")
	}
	if src.NeedLeaderElection() {
		t.Error("NeedLeaderElection() = true, want false: every replica needs the policies")
	}
}
