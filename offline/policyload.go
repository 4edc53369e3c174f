package offline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	kjson "sigs.k8s.io/json"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	policyv1 "github.com/modelgate/modelgate/api/policy/v1"
	"github.com/modelgate/modelgate/policies"
	"github.com/modelgate/modelgate/policies/celform"
	"github.com/modelgate/modelgate/validators"
)

// ErrNoPolicies marks a policy path that holds no policy at all, most
// likely the wrong path.
var ErrNoPolicies = errors.New("holds no .rego policy and no WorkloadPolicy object")

// PositionError is a problem at a position of a file.
type PositionError struct {
	File      string
	Line, Col int
	Err       error
}

// Error renders "file:line:col: message".
func (e *PositionError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Line, e.Col, e.Err)
}

// Unwrap returns the cause.
func (e *PositionError) Unwrap() error { return e.Err }

// LoadPolicies loads the policies at path as the server would get them:
//
//   - a directory holding .rego files is a policy directory, loaded with
//     policies.LoadDir as --policy-dir loads it (each <name>.rego with its
//     optional <name>.yaml settings; <name>_test.rego skipped);
//   - any other directory, or a single file, holds WorkloadPolicy objects
//     in its .yaml and .yml files (multi-document; kustomization files and
//     other kinds are skipped; subdirectories are not read), each compiled
//     with validators.CompileWorkloadPolicy as the WorkloadPolicy
//     controller compiles it.
//
// Every policy that fails to load is reported, not only the first: the
// error joins one error per failure, with file:line:col where there is a
// position (a Rego problem in a WorkloadPolicy is placed in its YAML file).
func LoadPolicies(ctx context.Context, path string) ([]*policies.Compiled, error) {
	cs, _, err := loadPolicies(ctx, path)
	return cs, err
}

// loadPolicies is LoadPolicies, with the WorkloadPolicies it compiled
// (none from a policy directory), for their CEL forms.
func loadPolicies(ctx context.Context, path string) ([]*policies.Compiled, []located, error) {
	files, regoDir, err := policyFiles(path)
	if err != nil {
		return nil, nil, err
	}
	if regoDir {
		cs, errs := policies.LoadDir(ctx, path)
		return cs, nil, errors.Join(errs...)
	}
	var (
		out   []*policies.Compiled
		wps   []located
		errs  []error
		where = map[string]string{}
	)
	for _, f := range files {
		loaded, ferrs := loadPolicyFile(ctx, f)
		errs = append(errs, ferrs...)
		for _, l := range loaded {
			if first, dup := where[l.c.Name()]; dup {
				errs = append(errs, fmt.Errorf("%s: WorkloadPolicy %q is defined twice (first at %s)", l.where, l.c.Name(), first))
				continue
			}
			where[l.c.Name()] = l.where
			out = append(out, l.c)
			wps = append(wps, l)
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		return nil, nil, fmt.Errorf("%s %w", path, ErrNoPolicies)
	}
	return out, wps, errors.Join(errs...)
}

// policyFiles are the YAML files of WorkloadPolicies at path (LoadPolicies),
// or regoDir when path is a policy directory of .rego files.
func policyFiles(path string) (files []string, regoDir bool, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("policies: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, false, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, false, fmt.Errorf("policies: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, "_test.rego") {
			return nil, true, nil
		}
		if !e.IsDir() && !strings.HasPrefix(name, ".") && isYAML(name) && !isKustomization(name) {
			files = append(files, filepath.Join(path, name))
		}
	}
	return files, false, nil
}

func isYAML(name string) bool {
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

func isKustomization(name string) bool {
	switch name {
	case "kustomization.yaml", "kustomization.yml", "Kustomization":
		return true
	}
	return false
}

// located is a compiled policy, its WorkloadPolicy, and where it was
// defined.
type located struct {
	c     *policies.Compiled
	wp    *policyv1.WorkloadPolicy
	where string
}

// loadPolicyFile compiles the WorkloadPolicy objects of one file.
func loadPolicyFile(ctx context.Context, file string) ([]located, []error) {
	data, err := os.ReadFile(file) //nolint:gosec // the path is the user's own argument.
	if err != nil {
		return nil, []error{err}
	}
	docs, err := SplitDocuments(file, data)
	errs := Unjoin(err)
	var out []located
	for i := range docs {
		d := &docs[i]
		ti, err := ReadTypeInfo(d.JSON)
		if err != nil {
			errs = append(errs, &DocumentError{Doc: d, Err: err})
			continue
		}
		group, _, _ := strings.Cut(ti.APIVersion, "/")
		if ti.Kind != "WorkloadPolicy" || group != policyv1.GroupVersion.Group {
			continue // another kind: kustomize patches, a Namespace, ...
		}
		if ti.APIVersion != policyv1.GroupVersion.String() {
			errs = append(errs, &DocumentError{Doc: d, Err: fmt.Errorf("WorkloadPolicy %s: only %s is supported",
				ti.APIVersion, policyv1.GroupVersion)})
			continue
		}
		c, wp, err := compileDocument(ctx, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, located{c: c, wp: wp, where: d.Where()})
	}
	return out, errs
}

// compileDocument decodes one WorkloadPolicy strictly and compiles it: its
// Rego, and its CEL form as the validating webhook checks it at apply.
func compileDocument(ctx context.Context, d *Document) (*policies.Compiled, *policyv1.WorkloadPolicy, error) {
	wp := &policyv1.WorkloadPolicy{}
	strict, err := kjson.UnmarshalStrict(d.JSON, wp)
	if err == nil && len(strict) > 0 {
		err = errors.Join(strict...)
	}
	if err != nil {
		return nil, nil, &DocumentError{Doc: d, Err: fmt.Errorf("decoding WorkloadPolicy: %w", err)}
	}
	if wp.Name == "" {
		return nil, nil, &DocumentError{Doc: d, Err: errors.New("WorkloadPolicy has no metadata.name")}
	}
	c, err := validators.CompileWorkloadPolicy(ctx, wp)
	if err == nil {
		if errs := celform.Check(wp, celform.Keys{}); len(errs) > 0 {
			line, col := d.Line, 1
			if cel := findKey(d, "spec", "cel"); cel != nil {
				line, col = cel.Line, cel.Column
			}
			return nil, nil, &PositionError{File: d.File, Line: line, Col: col, Err: fmt.Errorf("WorkloadPolicy %q: %w", wp.Name, errs.ToAggregate())}
		}
		return c, wp, nil
	}
	rego := findNode(d, "spec", "rego")
	if ce, ok := errors.AsType[*policies.CompileError](err); ok {
		return nil, nil, placeProblems(ce, d, rego)
	}
	line, col := d.Line, 1
	if spec := findKey(d, "spec"); spec != nil {
		line, col = spec.Line, spec.Column
	}
	return nil, nil, &PositionError{File: d.File, Line: line, Col: col, Err: fmt.Errorf("WorkloadPolicy %q: %w", wp.Name, err)}
}

// placeProblems moves the positions of a WorkloadPolicy's Rego problems,
// relative to spec.rego, to the YAML file. A literal block (rego: |) maps
// line for line; any other style puts every problem at the value, with
// its position in the module in the message.
func placeProblems(ce *policies.CompileError, d *Document, rego *kyaml.Node) *policies.CompileError {
	out := &policies.CompileError{Filename: d.File, Problems: slices.Clone(ce.Problems)}
	if rego == nil {
		for i := range out.Problems {
			out.Problems[i].Row, out.Problems[i].Col = d.Line, 1
		}
		return out
	}
	valueLine := rego.Line
	indent := blockIndent(d.padded(), rego.Line)
	for i := range out.Problems {
		p := &out.Problems[i]
		switch {
		case rego.Style == kyaml.LiteralStyle && p.Row > 0:
			p.Row, p.Col = valueLine+p.Row, p.Col+indent
		case p.Row > 0:
			p.Message = fmt.Sprintf("%s (spec.rego %d:%d)", p.Message, p.Row, p.Col)
			p.Row, p.Col = valueLine, rego.Column
		default:
			p.Row, p.Col = valueLine, rego.Column
		}
	}
	return out
}

// blockIndent is the indentation of a block scalar's content: the leading
// spaces of the first non-blank line after the header on line header.
func blockIndent(text []byte, header int) int {
	lines := strings.Split(string(text), "\n")
	for i := header; i < len(lines); i++ {
		if l := lines[i]; strings.TrimSpace(l) != "" {
			return len(l) - len(strings.TrimLeft(l, " "))
		}
	}
	return 0
}

// findNode returns the value node at a path of mapping keys in a
// document, or nil; its positions are the file's.
func findNode(d *Document, path ...string) *kyaml.Node {
	_, v := find(d, path)
	return v
}

// findKey returns the key node at the end of a path of mapping keys, or
// nil.
func findKey(d *Document, path ...string) *kyaml.Node {
	k, _ := find(d, path)
	return k
}

func find(d *Document, path []string) (key, value *kyaml.Node) {
	var doc kyaml.Node
	if err := kyaml.Unmarshal(d.padded(), &doc); err != nil || len(doc.Content) == 0 {
		return nil, nil
	}
	value = doc.Content[0]
	for _, k := range path {
		if value.Kind != kyaml.MappingNode {
			return nil, nil
		}
		var found bool
		for i := 0; i+1 < len(value.Content); i += 2 {
			if value.Content[i].Value == k {
				key, value, found = value.Content[i], value.Content[i+1], true
				break
			}
		}
		if !found {
			return nil, nil
		}
	}
	return key, value
}

// Unjoin returns the errors joined in err (errors.Join), err alone when it
// joins nothing, and none for nil.
func Unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
