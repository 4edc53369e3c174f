package main

import (
	"fmt"
	"strings"
)

// This file reads the words of a script: quotes, backslashes, parameter
// expansions, and a leading ~.

// add appends p to w, joining literal text of the same quoting.
func (w *word) add(p part) {
	if n := len(*w); n > 0 && p.param == "" {
		if last := &(*w)[n-1]; last.param == "" && last.quoted == p.quoted {
			last.text += p.text
			return
		}
	}
	*w = append(*w, p)
}

// word reads one word.
func (l *lexer) word() (word, error) {
	var w word
	for !l.eof() {
		c := l.src[l.pos]
		switch {
		case strings.IndexByte(" \t\n;&|<>()", c) >= 0:
			return w, nil
		case c == '\\':
			switch {
			case l.peek(1) == '\n':
				l.line++
			case l.pos+1 < len(l.src):
				w.add(part{text: l.src[l.pos+1 : l.pos+2], quoted: true})
			default:
				w.add(part{text: `\`, quoted: true})
			}
			l.pos += 2
		case c == '\'':
			end := strings.IndexByte(l.src[l.pos+1:], '\'')
			if end < 0 {
				return nil, l.syntax("unterminated single quote")
			}
			text := l.src[l.pos+1 : l.pos+1+end]
			w.add(part{text: text, quoted: true})
			l.line += strings.Count(text, "\n")
			l.pos += end + 2
		case c == '"':
			l.pos++
			if err := l.doubleQuoted(&w); err != nil {
				return nil, err
			}
		case c == '$':
			p, err := l.dollar(false)
			if err != nil {
				return nil, err
			}
			w.add(p)
		case c == '`':
			return nil, l.unsupported("command substitution (`...`)")
		case c == '~' && len(w) == 0 && (l.pos+1 == len(l.src) || strings.IndexByte("/ \t\n;&|<>()", l.peek(1)) >= 0):
			w.add(part{param: "HOME", quoted: true}) // ~ and ~/path; ~user is left as it is
			l.pos++
		default:
			j := l.pos + 1
			for j < len(l.src) && strings.IndexByte(" \t\n;&|<>()\\'\"$`", l.src[j]) < 0 {
				j++
			}
			w.add(part{text: l.src[l.pos:j]})
			l.pos = j
		}
	}
	return w, nil
}

// doubleQuoted reads the rest of a "..." string into w.
func (l *lexer) doubleQuoted(w *word) error {
	start, n := l.line, len(*w)
	for !l.eof() {
		switch c := l.src[l.pos]; c {
		case '"':
			l.pos++
			if len(*w) == n {
				w.add(part{quoted: true}) // "" is a word; "$@" may not be
			}
			return nil
		case '\\':
			switch n := l.peek(1); {
			case n == '\n':
				l.pos += 2
				l.line++
			case n != 0 && strings.IndexByte("$`\"\\", n) >= 0:
				w.add(part{text: string(n), quoted: true})
				l.pos += 2
			default:
				w.add(part{text: `\`, quoted: true})
				l.pos++
			}
		case '$':
			p, err := l.dollar(true)
			if err != nil {
				return err
			}
			w.add(p)
		case '`':
			return l.unsupported("command substitution (`...`)")
		default:
			j := l.pos + 1
			for j < len(l.src) && strings.IndexByte("\"\\$`", l.src[j]) < 0 {
				j++
			}
			text := l.src[l.pos:j]
			w.add(part{text: text, quoted: true})
			l.line += strings.Count(text, "\n")
			l.pos = j
		}
	}
	l.line = start
	return l.syntax("unterminated double quote")
}

// dollar reads what begins with $.
func (l *lexer) dollar(quoted bool) (part, error) {
	n := l.peek(1)
	switch {
	case n == '(' && l.peek(2) == '(':
		return part{}, l.unsupported("arithmetic expansion ($((...)))")
	case n == '(':
		return part{}, l.unsupported("command substitution ($(...))")
	case n == '{':
		end := strings.IndexByte(l.src[l.pos:], '}')
		if end < 0 {
			return part{}, l.syntax("missing } in ${")
		}
		inner := l.src[l.pos+2 : l.pos+end]
		l.pos += end + 1
		return parseBraced(inner, quoted, l)
	case n == '_' || n >= 'A' && n <= 'Z' || n >= 'a' && n <= 'z':
		j := l.pos + 2
		for j < len(l.src) && isNameByte(l.src[j]) {
			j++
		}
		name := l.src[l.pos+1 : j]
		l.pos = j
		return part{param: name, quoted: quoted}, nil
	case n >= '0' && n <= '9' || n == '@' || n == '*' || n == '#' || n == '?':
		l.pos += 2
		return part{param: string(n), quoted: quoted}, nil
	case n == '$' || n == '!' || n == '-':
		return part{}, l.unsupported(fmt.Sprintf("special parameter $%c", n))
	}
	l.pos++
	return part{text: "$", quoted: quoted}, nil
}

// parseBraced reads the inside of ${...}: a parameter, optionally with a
// literal default after :- or -.
func parseBraced(inner string, quoted bool, l *lexer) (part, error) {
	name, op, def := inner, "", ""
	for _, o := range []string{":-", "-"} {
		if i := strings.Index(inner, o); i > 0 {
			name, op, def = inner[:i], o, inner[i+len(o):]
			break
		}
	}
	special := len(name) == 1 && strings.IndexByte("@*#?", name[0]) >= 0
	if !nameRE.MatchString(name) && !isDigits(name) && !special {
		if name == "" {
			return part{}, l.syntax("bad substitution ${%s}", inner)
		}
		return part{}, l.unsupported(fmt.Sprintf("parameter expansion ${%s}", inner))
	}
	if strings.ContainsAny(def, "$`\\'\"") {
		return part{}, l.unsupported(fmt.Sprintf("expansions or quotes in a default (${%s})", inner))
	}
	return part{param: name, op: op, text: def, quoted: quoted}, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
