package policies

import (
	"errors"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Codes of the problems Compile finds itself; OPA's own problems keep their
// codes (rego_parse_error, rego_compile_error, rego_type_error, ...).
const (
	// CodeContract marks a module that does not follow the policy contract:
	// no deny or warn rule, or one that is not a set.
	CodeContract = "modelgate_contract_error"
	// CodeBuiltin marks a call of a builtin admission policies may not use
	// (see allowedBuiltins).
	CodeBuiltin = "modelgate_builtin_error"
)

// Problem is one error in a policy module, at a 1-based row and column
// (both 0 when the problem has no position).
type Problem struct {
	Row, Col int
	// Code classifies the problem, e.g. rego_parse_error.
	Code string
	// Message describes the problem.
	Message string
	// Details are extra lines, such as the offending source line or the
	// argument types of a type error.
	Details []string
}

// CompileError lists every problem found in one policy module.
type CompileError struct {
	// Filename is the module's file name, as used in messages.
	Filename string
	// Problems is never empty.
	Problems []Problem
}

// Error renders one "file:row:col: code: message" line per problem, detail
// lines indented below it.
func (e *CompileError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Filename)
		if p.Row > 0 {
			b.WriteString(":" + strconv.Itoa(p.Row) + ":" + strconv.Itoa(p.Col))
		}
		b.WriteString(": " + p.Code + ": " + p.Message)
		for _, d := range p.Details {
			b.WriteString("\n\t" + d)
		}
	}
	return b.String()
}

// compileError converts OPA's errors (ast.Errors, or anything wrapping
// them) into a CompileError; other errors become one position-less problem.
func compileError(filename string, err error) *CompileError {
	ce := &CompileError{Filename: filename}
	var astErrs ast.Errors
	var astErr *ast.Error
	switch {
	case errors.As(err, &astErrs):
		for _, e := range astErrs {
			ce.Problems = append(ce.Problems, problem(e))
		}
	case errors.As(err, &astErr):
		ce.Problems = append(ce.Problems, problem(astErr))
	}
	if len(ce.Problems) == 0 {
		ce.Problems = []Problem{{Code: ast.CompileErr, Message: err.Error()}}
	}
	return ce
}

func problem(e *ast.Error) Problem {
	p := Problem{Code: e.Code, Message: e.Message}
	if name, ok := strings.CutPrefix(e.Message, "undefined function "); ok && e.Code == ast.TypeErr {
		if why := refusal(name); why != "" {
			p.Code = CodeBuiltin
			p.Message = name + " is not available to admission policies: " + why +
				`; see docs/policies.md "Builtins"`
		}
	}
	if e.Location != nil {
		p.Row, p.Col = e.Location.Row, e.Location.Col
	}
	if e.Details != nil {
		p.Details = e.Details.Lines()
	}
	return p
}

// FileError is a policy file, or its sibling YAML file, that failed to load.
type FileError struct {
	// File is the path of the file at fault.
	File string
	// Err is the cause; a *CompileError for a module that does not compile.
	Err error
}

// Error names the file; a CompileError already does so on every line.
func (e *FileError) Error() string {
	var ce *CompileError
	if errors.As(e.Err, &ce) {
		return e.Err.Error()
	}
	return e.File + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }
