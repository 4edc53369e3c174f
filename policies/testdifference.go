package policies

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// What `modelgate test` tells of an input the admission path answers
// otherwise than OPA (testadmission.go).

// inputAbbrev bounds the input's JSON in a Difference.
const inputAbbrev = 300

// Difference is an input of a test that the admission path answers
// otherwise than OPA: the cluster would not enforce what the test shows.
type Difference struct {
	// Row is the line of the with that gave the input.
	Row int
	// Input is the input as JSON, cut after a few hundred bytes.
	Input string
	// Step says which evaluation of the review differed: "" the first,
	// "cached" the decision cache's answer to the same review, "renamed"
	// the review with input.workload.name changed to Name.
	Step, Name string
	// OPA and Admission describe the two answers: "allows", "denies [...]",
	// "warns [...]", "fails: ...".
	OPA, Admission string
	// Note says how the input differs from any the cluster sends, when it
	// does (a missing or extra key of input).
	Note string
}

// Message is the difference in a sentence.
func (d Difference) Message() string {
	var b strings.Builder
	b.WriteString("the cluster would enforce this differently")
	switch d.Step {
	case "cached":
		b.WriteString(" once its decision cache answers")
	case "renamed":
		fmt.Fprintf(&b, " for a workload named %q", d.Name)
	}
	fmt.Fprintf(&b, ": OPA %s, the admission path %s", d.OPA, d.Admission)
	return b.String()
}

// answer renders an answer: "allows", "denies [...]", "warns [...]",
// both, or "fails: <error>".
func answer(r Result) string {
	if r.Err != nil {
		return "fails: " + r.Err.Error()
	}
	var parts []string
	if len(r.Deny) > 0 {
		parts = append(parts, "denies "+violationList(r.Deny))
	}
	if len(r.Warn) > 0 {
		parts = append(parts, "warns "+violationList(r.Warn))
	}
	if len(parts) == 0 {
		return "allows"
	}
	return strings.Join(parts, " and ")
}

// violationList renders messages as a list of quoted strings, each
// followed by its details when it has some.
func violationList(vs []Violation) string {
	texts := violationTexts(vs)
	for i, t := range texts {
		msg, details, _ := strings.Cut(t, "\x00")
		texts[i] = fmt.Sprintf("%q", msg)
		if details != "null" {
			texts[i] += " " + details
		}
	}
	return "[" + strings.Join(texts, ", ") + "]"
}

// abbreviate renders an input as JSON, cut after inputAbbrev bytes.
func abbreviate(in ast.Object) string {
	v, err := ast.JSON(in)
	if err != nil {
		return in.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return in.String()
	}
	s := string(b)
	if len(s) <= inputAbbrev {
		return s
	}
	cut := inputAbbrev
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// inputNote says how an input differs in shape from those the cluster
// sends, which always have workload, object, oldObject and parameters and
// nothing else; "" when it does not.
func inputNote(in ast.Object) string {
	var missing, extra []string
	for _, k := range []*ast.Term{workloadKey, objectKey, oldObjectKey, parametersKey} {
		if in.Get(k) == nil {
			missing = append(missing, string(k.Value.(ast.String)))
		}
	}
	in.Foreach(func(k, _ *ast.Term) {
		switch {
		case k.Equal(workloadKey), k.Equal(objectKey), k.Equal(oldObjectKey), k.Equal(parametersKey):
		default:
			extra = append(extra, k.String())
		}
	})
	var notes []string
	if len(missing) > 0 {
		notes = append(notes, "it has no "+strings.Join(missing, ", ")+" (the cluster sends null, and {} for parameters)")
	}
	if len(extra) > 0 {
		notes = append(notes, "it has "+strings.Join(extra, ", ")+", which the cluster never sends")
	}
	return strings.Join(notes, "; ")
}
