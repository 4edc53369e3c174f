package layout

import (
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// layers are the folders of modelgate's own packages, lowest first (STYLE.md
// and docs/development.md: cmd -> {webhook, controller, offline, audit,
// loader, pack, migrate} -> {mutators, validators} -> {policies, api} ->
// internal). A package belongs to the folder its path starts with, and may
// import packages of its own layer and the layers below, never one above.
// internal/ shares the lowest layer with api/ because its leaf helpers may
// read the API's types and keys (internal/seal signs what api/annotations
// names), and nothing else.
var layers = [][]string{
	{"api", "internal"},
	{"policies"},
	{"mutators", "validators"},
	{"certs", "controller"},
	{"webhook"},
	{"offline"},
	{"audit"},
	{"loader", "pack", "migrate"},
	{"cmd"},
}

// test/ holds what only tests and benchmarks may import; hack/ holds build
// helpers and generators, which only hack/ and test/ import and which
// import no test package.
const (
	testFolder = "test"
	hackFolder = "hack"
)

// serverCode is what the loader may not depend on: it runs in an init
// container beside the engine, and needs no Kubernetes server code.
var serverCode = []string{"k8s.io/apiserver", "k8s.io/kubernetes", "sigs.k8s.io/controller-runtime"}

// TestImportsPointDown holds every import between modelgate's packages to
// the layers: no package imports one above it, internal/ imports nothing
// above api/, no package outside test/ imports a test package, nothing
// imports cmd/ and only hack/ and test/ import hack/, and every package sits in a folder of a layer (a
// new top-level folder is placed in layers, on purpose). Run with -v to see
// the graph between folders.
func TestImportsPointDown(t *testing.T) {
	graph := importGraph(t, repoRoot(t), "./...")
	for _, err := range upwardImports(graph) {
		t.Error(err)
	}
	for _, edge := range folderEdges(graph) {
		t.Log(edge)
	}
}

// TestLoaderHasNoServerCode: `modelgate load` depends on no Kubernetes
// server package.
func TestLoaderHasNoServerCode(t *testing.T) {
	out := goList(t, repoRoot(t), "-deps", "-f", "{{.ImportPath}}", "./loader/...")
	for _, dep := range strings.Fields(out) {
		for _, s := range serverCode {
			if dep == s || strings.HasPrefix(dep, s+"/") {
				t.Errorf("the loader depends on %s: it must run without Kubernetes server code", dep)
			}
		}
	}
}

// TestUpwardImportsFound: the check names what it should, on a made-up
// graph.
func TestUpwardImportsFound(t *testing.T) {
	graph := map[string][]string{
		"internal/seal":    {"api/annotations"},
		"internal/offline": {"webhook", "api/v1"},
		"mutators":         {"loader", "internal/seal"},
		"webhook":          {"test/harnesses/env", "controller/policysource"},
		"hack/helmchart":   {"test/harnesses/env", "hack/render"},
		"test/perf/soak":   {"webhook", "test/harnesses/cluster", "cmd/modelgate"},
		"test/harnesses/x": {"hack/render", "webhook"},
		"newfolder/x":      {"api/v1"},
		"cmd/modelgate":    {"webhook", "loader", "hack/render"},
	}
	got := upwardImports(graph)
	var msgs []string
	for _, err := range got {
		msgs = append(msgs, err.Error())
	}
	want := []string{
		"cmd/modelgate imports hack/render: hack/ holds build helpers; only hack/ and test/ import one",
		"hack/helmchart imports test/harnesses/env: hack/ imports no test package",
		"internal/offline (layer internal) imports webhook (layer webhook), which stands above it",
		"mutators (layer mutators) imports loader (layer loader), which stands above it",
		"newfolder/x is in no layer: place the folder newfolder/ in layers (imports_test.go) and docs/development.md",
		"test/perf/soak imports cmd/modelgate: nothing imports cmd/",
		"webhook imports test/harnesses/env: only tests and test/ import a test package",
	}
	sort.Strings(msgs)
	if !slices.Equal(msgs, want) {
		t.Errorf("upwardImports found\n%s\nwant\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
}

// importGraph maps each package of the module (relative to it) to the
// module's packages it imports, test files left out.
func importGraph(t *testing.T, root, pattern string) map[string][]string {
	t.Helper()
	out := goList(t, root, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pattern)
	graph := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, ok := ownPackage(fields[0])
		if !ok {
			continue
		}
		graph[pkg] = []string{}
		for _, imp := range fields[1:] {
			if dep, ok := ownPackage(imp); ok {
				graph[pkg] = append(graph[pkg], dep)
			}
		}
	}
	if len(graph) == 0 {
		t.Fatalf("go list %s found no package of %s", pattern, module)
	}
	return graph
}

// ownPackage is path relative to the module, when it is one of its
// packages.
func ownPackage(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

func goList(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// folderOf is the folder of layers a package belongs to, and its layer's
// index; -1 when none holds it.
func folderOf(pkg string) (string, int) {
	for i, layer := range layers {
		for _, f := range layer {
			if pkg == f || strings.HasPrefix(pkg, f+"/") {
				return f, i
			}
		}
	}
	return "", -1
}

// topFolder is a package's top-level folder.
func topFolder(pkg string) string {
	return strings.SplitN(pkg, "/", 2)[0]
}

// upwardImports lists every import of graph that breaks the layering, in
// a stable order.
func upwardImports(graph map[string][]string) []error {
	var errs []error
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		top := topFolder(pkg)
		folder, layer := folderOf(pkg)
		if layer < 0 && top != testFolder && top != hackFolder {
			errs = append(errs, fmt.Errorf("%s is in no layer: place the folder %s/ in layers (imports_test.go) and docs/development.md", pkg, top))
			continue
		}
		for _, dep := range graph[pkg] {
			depTop := topFolder(dep)
			depFolder, depLayer := folderOf(dep)
			switch {
			case depTop == "cmd":
				errs = append(errs, fmt.Errorf("%s imports %s: nothing imports cmd/", pkg, dep))
			case depTop == hackFolder && top != hackFolder && top != testFolder:
				errs = append(errs, fmt.Errorf("%s imports %s: hack/ holds build helpers; only hack/ and test/ import one", pkg, dep))
			case depTop == testFolder && top == hackFolder:
				errs = append(errs, fmt.Errorf("%s imports %s: hack/ imports no test package", pkg, dep))
			case depTop == testFolder && top != testFolder:
				errs = append(errs, fmt.Errorf("%s imports %s: only tests and test/ import a test package", pkg, dep))
			case layer >= 0 && depLayer > layer:
				errs = append(errs, fmt.Errorf("%s (layer %s) imports %s (layer %s), which stands above it", pkg, folder, dep, depFolder))
			}
		}
	}
	return errs
}

// folderEdges is the graph between top-level folders (sub-folders of test/
// kept apart), one "from -> to, to" line per importing folder.
func folderEdges(graph map[string][]string) []string {
	unit := func(pkg string) string {
		parts := strings.SplitN(pkg, "/", 3)
		if parts[0] == testFolder && len(parts) > 1 {
			return parts[0] + "/" + parts[1]
		}
		return parts[0]
	}
	edges := map[string]map[string]bool{}
	for pkg, deps := range graph {
		from := unit(pkg)
		for _, dep := range deps {
			if to := unit(dep); to != from {
				if edges[from] == nil {
					edges[from] = map[string]bool{}
				}
				edges[from][to] = true
			}
		}
	}
	var lines []string
	for from, tos := range edges {
		list := make([]string, 0, len(tos))
		for to := range tos {
			list = append(list, to)
		}
		sort.Strings(list)
		lines = append(lines, from+" -> "+strings.Join(list, ", "))
	}
	sort.Strings(lines)
	return lines
}
