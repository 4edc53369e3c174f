package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// This file parses the shell scripts of `sh -c`, for the simple cases that
// published manifests use: words with quotes and backslashes, parameter
// expansion ($VAR, ${VAR}, ${VAR:-default}, $1, "$@"), leading NAME=value
// assignments, exec, and lists joined by &&, ||, ; and newlines. Anything
// else (pipes, redirections, subshells, command substitution, compound
// commands) is refused by name, rather than run differently than sh would.
// Glob characters are left as they are, as sh does when nothing matches.

// errUnsupported marks a script construct the stand-in's sh does not run.
var errUnsupported = errors.New("not supported by the stand-in sh")

// A script is a list of and-or lists, run in order.
type script []andOr

// An andOr is commands joined by && and ||: cmds[i+1] runs after cmds[i]
// as ops[i] says.
type andOr struct {
	cmds []simple
	ops  []string
}

// simple is a simple command: assignments, then words; exec replaces the
// shell by the command.
type simple struct {
	exec    bool
	assigns []assign
	words   []word
	line    int
}

// assign is a NAME=value word.
type assign struct {
	name  string
	value word
}

// A word is a shell word before expansion.
type word []part

// part is a piece of a word: literal text, or a parameter expansion (then
// text is its default, for op ":-" or "-"). Quoted parts are not split
// into fields.
type part struct {
	text   string
	param  string
	op     string
	quoted bool
}

// reserved are the words that begin compound commands.
var reserved = setOf("if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done",
	"case", "esac", "function", "select", "{", "}", "!", "[[", "]]")

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// lexer walks a script's text.
type lexer struct {
	src  string
	pos  int
	line int
}

func (l *lexer) eof() bool { return l.pos >= len(l.src) }

func (l *lexer) peek(n int) byte {
	if l.pos+n < len(l.src) {
		return l.src[l.pos+n]
	}
	return 0
}

func (l *lexer) unsupported(what string) error {
	return fmt.Errorf("line %d: %s: %w", l.line, what, errUnsupported)
}

func (l *lexer) syntax(format string, a ...any) error {
	return fmt.Errorf("line %d: syntax error: %s", l.line, fmt.Sprintf(format, a...))
}

// parseScript parses a script's text.
func parseScript(src string) (script, error) {
	l := &lexer{src: src, line: 1}
	var s script
	var cur andOr
	op := "" // an && or || waiting for its command
	end := func() {
		if len(cur.cmds) > 0 {
			s = append(s, cur)
		}
		cur = andOr{}
	}
	for {
		l.skipBlanks()
		if l.eof() {
			break
		}
		switch c := l.src[l.pos]; {
		case c == '\n':
			l.pos++
			l.line++
			if op == "" {
				end()
			}
		case c == ';':
			if l.peek(1) == ';' {
				return nil, l.unsupported(`case clauses (";;")`)
			}
			if op != "" || len(cur.cmds) == 0 {
				return nil, l.syntax(`unexpected ";"`)
			}
			l.pos++
			end()
		case (c == '&' || c == '|') && l.peek(1) == c:
			if op != "" || len(cur.cmds) == 0 {
				return nil, l.syntax("unexpected %q", l.src[l.pos:l.pos+2])
			}
			op = l.src[l.pos : l.pos+2]
			l.pos += 2
		default:
			cmd, err := l.command()
			if err != nil {
				return nil, err
			}
			if op != "" {
				cur.ops = append(cur.ops, op)
				op = ""
			}
			cur.cmds = append(cur.cmds, cmd)
		}
	}
	if op != "" {
		return nil, l.syntax("end of script after %q", op)
	}
	end()
	return s, nil
}

// skipBlanks skips blanks, line continuations and comments.
func (l *lexer) skipBlanks() {
	for !l.eof() {
		switch c := l.src[l.pos]; {
		case c == ' ' || c == '\t':
			l.pos++
		case c == '\\' && l.peek(1) == '\n':
			l.pos += 2
			l.line++
		case c == '#':
			for !l.eof() && l.src[l.pos] != '\n' {
				l.pos++
			}
		default:
			return
		}
	}
}

// operator names the construct an unquoted operator character begins, or
// "" if c ends a word without beginning one (blanks, newline, ;, && and ||
// are the parser's).
func (l *lexer) operator() string {
	switch c := l.src[l.pos]; c {
	case '|':
		if l.peek(1) != '|' {
			return `pipelines ("|")`
		}
	case '&':
		if l.peek(1) != '&' {
			return `background commands ("&")`
		}
	case '<', '>':
		return fmt.Sprintf("redirections (%q)", string(c))
	case '(', ')':
		return `subshells ("( )")`
	}
	return ""
}

// command reads a simple command, up to the operator or newline after it.
func (l *lexer) command() (simple, error) {
	cmd := simple{line: l.line}
	for {
		l.skipBlanks()
		if l.eof() || strings.IndexByte("\n;&|", l.src[l.pos]) >= 0 && l.operator() == "" {
			return cmd, nil
		}
		if what := l.operator(); what != "" {
			return cmd, l.unsupported(what)
		}
		w, err := l.word()
		if err != nil {
			return cmd, err
		}
		if len(cmd.words) == 0 {
			if a, ok := asAssign(w); ok {
				cmd.assigns = append(cmd.assigns, a)
				continue
			}
			if !cmd.exec && isLiteral(w, "exec") {
				cmd.exec = true
				continue
			}
			if len(w) == 1 && !w[0].quoted && w[0].param == "" && reserved[w[0].text] {
				return cmd, l.unsupported(fmt.Sprintf("compound commands (%q)", w[0].text))
			}
		}
		cmd.words = append(cmd.words, w)
	}
}

// isLiteral tells whether w is s, unquoted.
func isLiteral(w word, s string) bool {
	return len(w) == 1 && !w[0].quoted && w[0].param == "" && w[0].text == s
}

// asAssign reads w as NAME=value if it begins so, unquoted.
func asAssign(w word) (assign, bool) {
	if len(w) == 0 || w[0].quoted || w[0].param != "" || !assignRE.MatchString(w[0].text) {
		return assign{}, false
	}
	name, rest, _ := strings.Cut(w[0].text, "=")
	var value word
	if rest != "" {
		value = append(value, part{text: rest})
	}
	return assign{name: name, value: append(value, w[1:]...)}, true
}
