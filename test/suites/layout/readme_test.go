// Package layout holds the repository's map to the tree: the checks that the
// folders the documentation names exist, and that every folder is named.
package layout

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the module path of the repository's root go.mod.
const module = "github.com/modelgate/modelgate"

// untrackedTopLevel are folders that builds write and git ignores, skipped
// when the tree is not a git checkout and its files cannot be listed.
var untrackedTopLevel = []string{"bin", "dist"}

// TestReadmeArchitectureListsEveryFolder holds README.md's "## Architecture"
// block to the tree: every top-level folder has a line in it, and every
// folder its first column names exists.
func TestReadmeArchitectureListsEveryFolder(t *testing.T) {
	root := repoRoot(t)
	block, err := architectureBlock(readFile(t, root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, errs := blockEntries(block)
	for _, err := range errs {
		t.Error(err)
	}
	if len(entries) == 0 {
		t.Fatal(`README.md: the block under "## Architecture" names no folder`)
	}
	listed := map[string]bool{}
	for _, e := range entries {
		listed[strings.SplitN(e, "/", 2)[0]] = true
		if !isDir(root, e) {
			t.Errorf("README.md's Architecture block names %s/, which is not a folder of the repository", e)
		}
	}
	for _, dir := range topLevelFolders(t, root) {
		if !listed[dir] {
			t.Errorf("the top-level folder %s/ is missing from README.md's Architecture block: add a line for it", dir)
		}
	}
}

// TestDevelopmentWhereAChangeGoes holds docs/development.md's "Where a
// change goes" table to the tree: every path it names in backticks exists
// (for a pattern such as loader/<scheme>/, the folder before the
// placeholder).
func TestDevelopmentWhereAChangeGoes(t *testing.T) {
	root := repoRoot(t)
	table, err := section(readFile(t, root, "docs/development.md"), "Where a change goes")
	if err != nil {
		t.Fatal(err)
	}
	paths := tablePaths(table)
	if len(paths) < 20 {
		t.Fatalf(`docs/development.md: the table under "## Where a change goes" names %d paths, want a row per kind of change: %q`, len(paths), paths)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if seen[p] {
			continue
		}
		seen[p] = true
		if !exists(root, p) {
			t.Errorf("docs/development.md's \"Where a change goes\" table names %s, which does not exist", p)
		}
	}
}

// TestBlockEntries checks the parsing of the Architecture block on a
// sample, so that a block the parser misreads cannot pass unnoticed.
func TestBlockEntries(t *testing.T) {
	block := "cmd/modelgate/      main: flags and subcommands\n" +
		"api/v1/, api/v1beta1/\n" +
		"                    the CRD; see webhook/ for the handlers\n" +
		"test/harnesses/     env, cluster\n" +
		"config              kustomize\n" +
		"\n"
	got, errs := blockEntries(block)
	want := []string{"cmd/modelgate", "api/v1", "api/v1beta1", "test/harnesses"}
	if !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"config"`) {
		t.Errorf("errors %v, want one naming \"config\" (a folder is written with its slash)", errs)
	}
}

// TestTablePaths checks which backticked words of a table count as paths.
func TestTablePaths(t *testing.T) {
	table := "| change | where |\n|---|---|\n" +
		"| a | `api/annotations/keys.go`, `loader/<scheme>/`, `./controller/...`, `make manifests` |\n" +
		"| b | `modelgate.io/model`, `hf://org/repo`, `go test ./webhook -update`, `Makefile` |\n" +
		"not a row: `docs/x.md`\n"
	want := []string{"api/annotations/keys.go", "loader", "controller", "Makefile"}
	if got := tablePaths(table); !slices.Equal(got, want) {
		t.Errorf("tablePaths %q, want %q", got, want)
	}
}

// repoRoot walks up from the test's folder to the go.mod of the module.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+module+"\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of %s above the test's folder", module)
		}
		dir = parent
	}
}

func readFile(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the body of the markdown section "## title", up to the
// next section of the same level.
func section(doc, title string) (string, error) {
	head := "\n## " + title + "\n"
	start := strings.Index("\n"+doc, head)
	if start < 0 {
		return "", fmt.Errorf("no section %q", "## "+title)
	}
	body := doc[start+len(head)-1:]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	return body, nil
}

// architectureBlock returns the first fenced code block of README.md's
// "## Architecture" section.
func architectureBlock(readme string) (string, error) {
	body, err := section(readme, "Architecture")
	if err != nil {
		return "", fmt.Errorf("README.md: %w", err)
	}
	_, rest, ok := strings.Cut(body, "```")
	if !ok {
		return "", errors.New(`README.md: no fenced block under "## Architecture"`)
	}
	// The rest of the fence's line is its language, if any.
	if _, rest, ok = strings.Cut(rest, "\n"); !ok {
		return "", errors.New(`README.md: the block under "## Architecture" is not closed`)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return "", errors.New(`README.md: the block under "## Architecture" is not closed`)
	}
	return block, nil
}

// blockEntries returns the folders the first column of the Architecture
// block names, without their trailing slash. A line that starts with a
// space continues the one before; otherwise its first column runs to the
// first two spaces and holds one or more folders, separated by commas and
// each written with its trailing slash. A first-column word without the
// slash is an error.
func blockEntries(block string) ([]string, []error) {
	var entries []string
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue
		}
		first, _, _ := strings.Cut(line, "  ")
		for p := range strings.SplitSeq(first, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if !strings.HasSuffix(p, "/") {
				errs = append(errs, fmt.Errorf("README.md's Architecture block: %q in the first column is not written as a folder (with its trailing slash)", p))
				continue
			}
			entries = append(entries, strings.TrimSuffix(p, "/"))
		}
	}
	return entries, errs
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	// pathLike is a relative path: words of letters, digits, '.', '_', '-'
	// or a <placeholder>, joined by slashes, with a slash in it; a first
	// word without a dot, so that modelgate.io/model is no path.
	pathLike = regexp.MustCompile(`^(\./)?[A-Za-z0-9_-]+(/[A-Za-z0-9_.<>-]*)+(\.\.\.)?$`)
)

// rootFiles are the files at the repository's root a table may name
// without a slash.
var rootFiles = []string{"Makefile", "README.md", "go.mod", "Dockerfile"}

// tablePaths returns the paths named in backticks in the rows of a
// markdown table: the part before a <placeholder> when there is one,
// without a leading "./", a trailing "/..." or a trailing slash.
func tablePaths(table string) []string {
	var paths []string
	for line := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			p := m[1]
			if slices.Contains(rootFiles, p) {
				paths = append(paths, p)
				continue
			}
			if !pathLike.MatchString(p) {
				continue
			}
			p = strings.TrimPrefix(p, "./")
			p = strings.TrimSuffix(p, "...")
			if i := strings.Index(p, "<"); i >= 0 {
				p = p[:i]
				if j := strings.LastIndex(p, "/"); j >= 0 {
					p = p[:j]
				}
			}
			p = strings.TrimSuffix(p, "/")
			if p != "" {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

// topLevelFolders returns the repository's non-hidden top-level folders
// that hold a file git tracks or would track (untracked but not ignored:
// a folder about to be added counts, bin/ does not). Outside a git
// checkout it reads the root, skipping untrackedTopLevel.
func topLevelFolders(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	switch {
	case err == nil:
		for f := range strings.SplitSeq(string(out), "\x00") {
			if dir, _, ok := strings.Cut(f, "/"); ok {
				seen[dir] = true
			}
		}
	case errors.Is(err, exec.ErrNotFound) || !exists(root, ".git"):
		t.Logf("listing the folders without git (%v): every folder but %v", err, untrackedTopLevel)
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && !slices.Contains(untrackedTopLevel, e.Name()) {
				seen[e.Name()] = true
			}
		}
	default:
		t.Fatalf("git ls-files in %s: %v", root, err)
	}
	var dirs []string
	for dir := range seen {
		// A folder git still lists but the tree no longer has (deleted,
		// not yet committed) is not part of the tree.
		if !strings.HasPrefix(dir, ".") && isDir(root, dir) {
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	return dirs
}

func isDir(root, rel string) bool {
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil && fi.IsDir()
}

func exists(root, rel string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}
