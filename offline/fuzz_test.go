package offline

import (
	"bytes"
	"testing"
)

// FuzzSplitDocuments checks that any input splits without panicking into
// objects numbered in order, each starting on a line of the input.
func FuzzSplitDocuments(f *testing.F) {
	for _, seed := range []string{
		"a: 1\n",
		"---\na: 1\n--- # c\nb: 2\n...\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n---\n- x\n---\na: |\n  ---\n",
		"a: 1\na: 2\n",
		"\xef\xbb\xbfa: 1",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _ := SplitDocuments("f.yaml", data)
		lines := bytes.Count(data, []byte("\n")) + 1
		prev, prevLine := 0, 0
		for _, d := range docs {
			if d.Index <= prev || d.Line <= prevLine || d.Line > lines {
				t.Fatalf("document %d at line %d after document %d at line %d (input has %d lines)", d.Index, d.Line, prev, prevLine, lines)
			}
			if !bytes.HasPrefix(d.JSON, []byte("{")) {
				t.Fatalf("document %d is not an object: %s", d.Index, d.JSON)
			}
			prev, prevLine = d.Index, d.Line
		}
	})
}

// FuzzParseLabels checks that every label ParseLabels accepts is valid.
func FuzzParseLabels(f *testing.F) {
	for _, seed := range []string{"", "a=b", "modelgate.io/team=nlp, modelgate.io/ignore=", "a", "=x", "a=b=c"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		labels, err := ParseLabels(s)
		if err != nil {
			return
		}
		for k, v := range labels {
			if err := ValidateLabel(k, v); err != nil {
				t.Fatalf("accepted %q=%q: %v", k, v, err)
			}
		}
	})
}
