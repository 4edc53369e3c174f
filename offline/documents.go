package offline

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Document is one YAML document of a manifest file that holds an object.
type Document struct {
	// File is the file's name as given ("-" is standard input).
	File string
	// Index is the document's 1-based position among the file's documents
	// that hold something (empty and comment-only documents are skipped).
	Index int
	// Line is the 1-based line of the file the document starts on.
	Line int
	// Text is the document as written.
	Text []byte
	// JSON is the document converted to JSON.
	JSON []byte
}

// padded is the document's text preceded by the blank lines that put it
// where it is in the file, so that YAML parsers report file line numbers.
func (d *Document) padded() []byte {
	return append(bytes.Repeat([]byte("\n"), d.Line-1), d.Text...)
}

// Where names the document in messages: "file: document 2 (line 14)".
func (d *Document) Where() string {
	return fmt.Sprintf("%s: document %d (line %d)", d.File, d.Index, d.Line)
}

// DocumentError is a document that cannot be used.
type DocumentError struct {
	Doc *Document
	Err error
}

// Error names the file, the document and its first line.
func (e *DocumentError) Error() string { return e.Doc.Where() + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *DocumentError) Unwrap() error { return e.Err }

// ErrNotObject marks a document that is not a YAML mapping.
var ErrNotObject = errors.New("not a Kubernetes object: the document is not a mapping")

// SplitDocuments splits a multi-document YAML file on "---" lines (which
// may carry a comment, as kubectl accepts) and "..." document ends, and
// converts every document to JSON strictly: a duplicated key is an error.
// YAML errors give line numbers in the file, not in the document.
// Documents that hold nothing are skipped. All documents are converted; the
// error joins a *DocumentError per document that failed.
func SplitDocuments(file string, data []byte) ([]Document, error) {
	var (
		docs  []Document
		errs  []error
		cur   bytes.Buffer
		start = 1
		index = 0
	)
	flush := func() {
		d := Document{File: file, Line: start, Text: bytes.Clone(cur.Bytes())}
		cur.Reset()
		js, err := yaml.YAMLToJSONStrict(d.padded())
		if err == nil && string(js) == "null" {
			return // empty or only comments
		}
		index++
		d.Index, d.JSON = index, js
		switch {
		case err != nil:
			errs = append(errs, &DocumentError{Doc: &d, Err: err})
		case !bytes.HasPrefix(js, []byte("{")):
			errs = append(errs, &DocumentError{Doc: &d, Err: ErrNotObject})
		default:
			docs = append(docs, d)
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if isDocumentBoundary(text) {
			flush()
			start = line + 1
			continue
		}
		cur.WriteString(text)
		cur.WriteByte('\n')
	}
	flush()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return docs, errors.Join(errs...)
}

// isDocumentBoundary reports whether a line separates documents: "---"
// followed by nothing but blanks or a comment, or a "..." document end.
func isDocumentBoundary(line string) bool {
	if rest, ok := strings.CutPrefix(line, "---"); ok {
		rest = strings.TrimSpace(rest)
		return rest == "" || strings.HasPrefix(rest, "#")
	}
	return strings.TrimRight(line, " \t") == "..."
}

// TypeInfo is what identifies an object: its type and its metadata's
// name, generateName and namespace.
type TypeInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name         string            `json:"name"`
		GenerateName string            `json:"generateName"`
		Namespace    string            `json:"namespace"`
		Labels       map[string]string `json:"labels"`
	} `json:"metadata"`
}

// ErrNoKind marks an object without apiVersion or kind.
var ErrNoKind = errors.New("the object has no apiVersion or kind")

// ReadTypeInfo reads an object's type and metadata from its JSON.
func ReadTypeInfo(js []byte) (TypeInfo, error) {
	var ti TypeInfo
	if err := json.Unmarshal(js, &ti); err != nil {
		return TypeInfo{}, fmt.Errorf("reading apiVersion, kind and metadata: %w", err)
	}
	if ti.APIVersion == "" || ti.Kind == "" {
		return TypeInfo{}, ErrNoKind
	}
	return ti, nil
}

// DisplayName is the object's name, its generateName followed by "*"
// when the API server would generate it, or "<unnamed>".
func (t *TypeInfo) DisplayName() string {
	switch {
	case t.Metadata.Name != "":
		return t.Metadata.Name
	case t.Metadata.GenerateName != "":
		return t.Metadata.GenerateName + "*"
	}
	return "<unnamed>"
}
